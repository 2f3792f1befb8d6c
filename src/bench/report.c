/* report.c — the campaign's report.md and main table, generated from the results document alone
 * (results.json's tree), in the style of the reference reports: ratios with their intervals per
 * case and metric, absolute medians with the raw min/max, the checks, and plain sentences made from
 * the figures (what each arm spent: index reads, record loads, mapped-range requests, round trips).
 *
 * Nothing here measures or decides anything: every number printed is one of results.json's.
 */
#include <math.h>
#include <string.h>

#include "bench/campaign_int.h"

/* ---- Looking things up in the results ---------------------------------------------------------- */

static const char *jstr(json_t *o, const char *k) {
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

static double jnumv(json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* The summary entry of (topology, case, comparison, metric), or NULL. */
static json_t *find_summary(json_t *r, const char *topo, const char *kase, const char *cmp, const char *metric) {
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(r, "summary"), i, s) {
        if (!strcmp(jstr(s, "topology"), topo) && !strcmp(jstr(s, "case"), kase) &&
            !strcmp(jstr(s, "comparison"), cmp) && !strcmp(jstr(s, "metric"), metric))
            return s;
    }
    return NULL;
}

/* The per-arm figures {"median","min","max"} of (topology, case, arm, metric), or NULL. */
static json_t *find_arm(json_t *r, const char *topo, const char *kase, const char *arm, const char *metric) {
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(r, "arm_summary"), i, s) {
        if (!strcmp(jstr(s, "topology"), topo) && !strcmp(jstr(s, "case"), kase) && !strcmp(jstr(s, "arm"), arm))
            return json_object_get(json_object_get(s, "metrics"), metric);
    }
    return NULL;
}

static json_t *find_case(json_t *r, const char *topo, const char *kase) {
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(r, "cases"), i, s) {
        if (!strcmp(jstr(s, "topology"), topo) && !strcmp(jstr(s, "case"), kase)) return s;
    }
    return NULL;
}

/* ---- Number formatting ------------------------------------------------------------------------- */

/* An integer with thousands separators. */
static void put_int(rl_buf *b, double v) {
    char digits[32], out[48];
    snprintf(digits, sizeof digits, "%.0f", fabs(v));
    size_t n = strlen(digits), j = 0;
    if (v < 0 && digits[0] != '0') out[j++] = '-';
    for (size_t i = 0; i < n; i++) {
        out[j++] = digits[i];
        if ((n - i - 1) % 3 == 0 && i + 1 < n) out[j++] = ',';
    }
    out[j] = 0;
    rl__buf_append_str(b, out);
}

/* A count per op: integers with separators, small fractions with up to 2 decimals. */
static void put_count(rl_buf *b, double v) {
    if (isnan(v)) rl__buf_append_str(b, "n/a");
    else if (fabs(v - round(v)) < 0.005 || fabs(v) >= 1000) put_int(b, round(v));
    else rl__buf_printf(b, "%.2f", v);
}

/* A time per op from nanoseconds, three significant digits: "812 ns", "3.41 µs", "6.64 ms". */
static void put_time(rl_buf *b, double ns) {
    const char *unit = "ns";
    double v = ns;
    if (isnan(ns)) {
        rl__buf_append_str(b, "n/a");
        return;
    }
    if (ns >= 1e9) v = ns / 1e9, unit = "s";
    else if (ns >= 1e6) v = ns / 1e6, unit = "ms";
    else if (ns >= 1e3) v = ns / 1e3, unit = "µs";
    rl__buf_printf(b, v >= 100 ? "%.0f %s" : v >= 10 ? "%.1f %s" : "%.2f %s", v, unit);
}

/* "1 row", "10 rows", "0.50 rows". */
static void put_counted(rl_buf *b, double v, const char *one, const char *many) {
    put_count(b, v);
    rl__buf_printf(b, " %s", fabs(v - 1) < 0.005 ? one : many);
}

static void put_metric(rl_buf *b, const char *metric, double v) {
    if (!strcmp(metric, "ns_per_op")) put_time(b, v);
    else put_count(b, v);
}

/* "0.790 [0.771, 0.812]", "n/a (0 in both)", "n/a". */
static void put_ratio(rl_buf *b, json_t *s) {
    if (!s) {
        rl__buf_append_str(b, "—");
        return;
    }
    const char *st = jstr(s, "status");
    if (!strcmp(st, "ok"))
        rl__buf_printf(b, "%.3f [%.3f, %.3f]", jnumv(s, "ratio"), jnumv(s, "ci_low"), jnumv(s, "ci_high"));
    else if (!strcmp(st, "zero_zero")) rl__buf_append_str(b, "n/a (0 in both)");
    else rl__buf_append_str(b, "n/a");
}

/* ---- Tables ------------------------------------------------------------------------------------ */

static const char *const metrics_all[] = {"ns_per_op",       "bytes_per_op",       "allocs_per_op",   "rows_per_op",
                                          "requests_per_op", "round_trips_per_op", "kv_bytes_per_op", NULL};
static const char *const metric_titles[] = {"time/op",     "B/op",           "allocs/op",   "rows/op",
                                            "requests/op", "round trips/op", "KV bytes/op", NULL};

static int topo_ran(json_t *t) { return !strcmp(jstr(t, "status"), "ran"); }

/* Does any summary entry of topology exist for comparison cmp? */
static int has_comparison(json_t *r, const char *topo, const char *cmp) {
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(r, "summary"), i, s) {
        if (!strcmp(jstr(s, "topology"), topo) && !strcmp(jstr(s, "comparison"), cmp)) return 1;
    }
    return 0;
}

static void ratio_table(rl_buf *b, json_t *r, const char *topo, const char *cmp, int n_metrics) {
    json_t *p = json_object_get(r, "protocol");
    size_t i;
    json_t *kname;
    rl__buf_append_str(b, "| case | label |");
    for (int m = 0; m < n_metrics; m++) rl__buf_printf(b, " %s |", metric_titles[m]);
    rl__buf_append_str(b, "\n|---|---|");
    for (int m = 0; m < n_metrics; m++) rl__buf_append_str(b, "---|");
    rl__buf_append_str(b, "\n");
    json_array_foreach(json_object_get(p, "cases"), i, kname) {
        const char *k = json_string_value(kname);
        json_t *kc = find_case(r, topo, k);
        if (!kc) continue;
        rl__buf_printf(b, "| %s | %s |", k, jstr(kc, "label"));
        for (int m = 0; m < n_metrics; m++) {
            rl__buf_append_str(b, " ");
            put_ratio(b, find_summary(r, topo, k, cmp, metrics_all[m]));
            rl__buf_append_str(b, " |");
        }
        rl__buf_append_str(b, "\n");
    }
}

/* The note on a comparison whose time ratio and medians point different ways: the ratio (the
 * geometric mean of the paired block ratios) below 1 and the arm's median of block medians above
 * its baseline's, or the other way round. For adaptive/best the baseline's median is the smaller of
 * ordinary's and remote's. Appended as one list item per such case; nothing when they agree. */
static void direction_notes(rl_buf *b, json_t *r, const char *topo) {
    json_t *p = json_object_get(r, "protocol");
    size_t i;
    json_t *kname;
    int any = 0;
    json_array_foreach(json_object_get(p, "cases"), i, kname) {
        const char *k = json_string_value(kname);
        for (int c = 0; c < RL_CAMP_COMPARISONS; c++) {
            const char *cmp = rl__camp_comparison_name(c);
            json_t *s = find_summary(r, topo, k, cmp, "ns_per_op");
            if (!s || strcmp(jstr(s, "status"), "ok")) continue;
            const char *arm = jstr(s, "arm"), *base = jstr(s, "baseline");
            json_t *fa = find_arm(r, topo, k, arm, "ns_per_op");
            double ma = fa ? jnumv(fa, "median") : NAN, mb;
            if (!strcmp(base, "best")) {
                json_t *fo = find_arm(r, topo, k, "ordinary", "ns_per_op"),
                       *fr = find_arm(r, topo, k, "remote", "ns_per_op");
                double o = fo ? jnumv(fo, "median") : NAN, rr = fr ? jnumv(fr, "median") : NAN;
                mb = o < rr ? o : rr;
            } else {
                json_t *fb = find_arm(r, topo, k, base, "ns_per_op");
                mb = fb ? jnumv(fb, "median") : NAN;
            }
            double ratio = jnumv(s, "ratio");
            if (isnan(ma) || isnan(mb) || ratio == 1 || ma == mb || (ratio < 1) == (ma < mb)) continue;
            if (!any) rl__buf_append_str(b, "\n");
            any = 1;
            rl__buf_printf(b, "- Note, %s %s: the ratio %.3f says %s is %s than %s, but the medians (", k, cmp, ratio,
                           arm, ratio < 1 ? "faster" : "slower", base);
            put_time(b, ma);
            rl__buf_append_str(b, " vs ");
            put_time(b, mb);
            rl__buf_printf(b,
                           ") say %s. This can happen: the ratio pairs the arms within each block and averages "
                           "the %lld block ratios on a log scale, while each median is taken over one arm's block "
                           "medians alone; when blocks differ (drift, one noisy block) or the difference is small "
                           "against the spread, the middle block of one arm is not the middle block of the other. "
                           "The ratio is the paired comparison; its interval says whether either direction is "
                           "resolved.\n",
                           ma < mb ? "faster" : "slower",
                           (long long)json_integer_value(json_object_get(s, "n_blocks")));
        }
    }
}

/* ---- Beside the reference reports ------------------------------------------------------------- */

/* The reference figure of (kind, case) in the results' "reference", or NULL. */
static json_t *find_reference(json_t *r, const char *kind, const char *kase) {
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(json_object_get(r, "reference"), "figures"), i, f) {
        if (!strcmp(jstr(f, "topology_kind"), kind) && !strcmp(jstr(f, "case"), kase)) return f;
    }
    return NULL;
}

/* A published time in ms, to the digits reports print (four significant: 24, 108, 4.87, 276.9). */
static void put_ms(rl_buf *b, double ms) { rl__buf_printf(b, "%.4g ms", ms); }

/* A time ratio's direction: -1 below 1 (remote faster), 1 above, 0 at 1. */
static int direction_of(double ratio) { return ratio < 1 ? -1 : ratio > 1 ? 1 : 0; }

/* The direction a reference figure gives remote fetch against SCAN_AND_FETCH: -1 faster, 1
 * slower, 0 none (no figure, a ratio of exactly 1, or a range that holds 1) — from its ratio, or
 * from its range when only that was published. */
static int ref_direction(json_t *f) {
    if (!f) return 0;
    double rr = jnumv(f, "ratio"), lo = jnumv(f, "range_low"), hi = jnumv(f, "range_high");
    if (!isnan(rr)) return direction_of(rr);
    if (!isnan(lo)) return hi < 1 ? -1 : lo > 1 ? 1 : 0;
    return 0;
}

static void differing_notes(rl_buf *b, json_t *r, json_t *t);

/* The table of our remote/ordinary time figures beside the report matched to the topology's kind
 * (C3 for single, M2 for multi): its ratio and interval, its absolute times where published, and
 * whether the two point the same way. Every case of the run has a row; a case the report gives no
 * figure for says "not published". */
static void reference_table(rl_buf *b, json_t *r, json_t *t) {
    const char *topo = jstr(t, "name"), *kind = jstr(t, "kind");
    json_t *ref = json_object_get(r, "reference"), *rep = NULL, *x, *kname;
    size_t i;
    json_array_foreach(json_object_get(ref, "reports"), i, x) {
        if (!strcmp(jstr(x, "topology_kind"), kind)) rep = x;
    }
    if (!rep) return;
    const char *name = jstr(rep, "report");
    rl__buf_printf(b,
                   "\nBeside the reference report %s (\"%s\", `%s`: %s); its figures are remote/ordinary time "
                   "ratios with nominal 95%% intervals, and medians of block medians:\n\n",
                   name, jstr(rep, "title"), jstr(rep, "file"), jstr(rep, "setup"));
    rl__buf_printf(b,
                   "| case | ours: remote/ordinary | ours: remote vs ordinary | %s: remote/ordinary | %s: remote vs "
                   "ordinary | same direction? | source |\n|---|---|---|---|---|---|---|\n",
                   name, name);
    json_array_foreach(json_object_get(json_object_get(r, "protocol"), "cases"), i, kname) {
        const char *k = json_string_value(kname);
        if (!find_case(r, topo, k)) continue;
        json_t *s = find_summary(r, topo, k, "remote/ordinary", "ns_per_op"), *f = find_reference(r, kind, k);
        rl__buf_printf(b, "| %s | ", k);
        put_ratio(b, s);
        rl__buf_append_str(b, " | ");
        json_t *fo = find_arm(r, topo, k, "ordinary", "ns_per_op"), *fr = find_arm(r, topo, k, "remote", "ns_per_op");
        if (fo && fr) {
            put_time(b, jnumv(fr, "median"));
            rl__buf_append_str(b, " vs ");
            put_time(b, jnumv(fo, "median"));
        } else rl__buf_append_str(b, "—");
        rl__buf_append_str(b, " | ");
        double rr = f ? jnumv(f, "ratio") : NAN, lo = f ? jnumv(f, "range_low") : NAN;
        if (!f) rl__buf_append_str(b, "not published");
        else if (!isnan(rr) && !isnan(jnumv(f, "ci_low")))
            rl__buf_printf(b, "%.3f [%.3f, %.3f]", rr, jnumv(f, "ci_low"), jnumv(f, "ci_high"));
        else if (!isnan(rr)) rl__buf_printf(b, "%.3f (no interval published)", rr);
        else if (!isnan(lo))
            rl__buf_printf(b, "not published (only the range %.3f–%.3f over the 1,000-row cases)", lo,
                           jnumv(f, "range_high"));
        else rl__buf_append_str(b, "not published");
        rl__buf_append_str(b, " | ");
        if (f && !isnan(jnumv(f, "remote_ms"))) {
            put_ms(b, jnumv(f, "remote_ms"));
            rl__buf_append_str(b, " vs ");
            put_ms(b, jnumv(f, "ordinary_ms"));
        } else rl__buf_append_str(b, "not published");
        rl__buf_append_str(b, " | ");
        int theirs = ref_direction(f);
        double ours = s && !strcmp(jstr(s, "status"), "ok") ? jnumv(s, "ratio") : NAN;
        if (!theirs || isnan(ours)) rl__buf_append_str(b, "—");
        else {
            rl__buf_append_str(b, direction_of(ours) == theirs ? "yes" : "**no**");
            if (jnumv(s, "ci_low") <= 1 && jnumv(s, "ci_high") >= 1)
                rl__buf_append_str(b, " (ours not resolved: its interval holds 1)");
        }
        if (f)
            rl__buf_printf(b, " | `%s` line %lld |\n", jstr(f, "file"),
                           (long long)json_integer_value(json_object_get(f, "line")));
        else rl__buf_append_str(b, " | — |\n");
    }
    json_t *rtt = json_object_get(ref, "rtt");
    if (rtt && !strcmp(jstr(rtt, "topology_kind"), kind)) {
        json_t *kc = NULL, *c;
        json_array_foreach(json_object_get(r, "cases"), i, c) {
            if (!kc && !strcmp(jstr(c, "topology"), topo)) kc = c;
        }
        json_t *rb = json_object_get(json_object_get(kc, "checks"), "rtt_before");
        rl__buf_append_str(b, "\nRound trip: ours ");
        if (rb && json_is_true(json_object_get(rb, "applicable")))
            rl__buf_printf(b, "p50 %.3f ms, p99 %.3f ms (the probe before the first case)", jnumv(rb, "p50_us") / 1e3,
                           jnumv(rb, "p99_us") / 1e3);
        else rl__buf_append_str(b, "not measured");
        rl__buf_printf(b, "; %s's ping before its phase p50 %.3f ms, p99 %.3f ms (`%s` line %lld).\n",
                       jstr(rtt, "report"), jnumv(rtt, "p50_ms"), jnumv(rtt, "p99_ms"), jstr(rtt, "file"),
                       (long long)json_integer_value(json_object_get(rtt, "line")));
    }
    differing_notes(b, r, t);
}

void rl__camp_report_main_table(json_t *r, rl_buf *b) {
    size_t ti, i;
    json_t *t, *kname;
    json_t *p = json_object_get(r, "protocol");
    json_array_foreach(json_object_get(r, "topologies"), ti, t) {
        const char *topo = jstr(t, "name");
        if (!topo_ran(t)) {
            rl__buf_printf(b, "\n%s (%s): %s — %s\n", topo, jstr(t, "kind"), jstr(t, "status"), jstr(t, "reason"));
            continue;
        }
        int sq = has_comparison(r, topo, "sqlite/ordinary"), ad = has_comparison(r, topo, "adaptive/best"),
            rg = has_comparison(r, topo, "remote-grouped/ordinary");
        rl__buf_printf(b, "\n%s (%s, %d µs one way): time per query, ratio [%.0f%% interval] of %d blocks\n\n", topo,
                       jstr(t, "kind"), (int)json_integer_value(json_object_get(t, "delay_us")),
                       100 * jnumv(json_object_get(p, "statistics"), "level"),
                       (int)json_integer_value(json_object_get(json_object_get(p, "design"), "blocks")));
        rl__buf_append_str(b, "| case | label | remote/ordinary |");
        if (rg) rl__buf_append_str(b, " remote-grouped/ordinary |");
        if (ad) rl__buf_append_str(b, " adaptive/best |");
        if (sq) rl__buf_append_str(b, " sqlite/ordinary |");
        rl__buf_append_str(b, " ordinary | remote |");
        if (rg) rl__buf_append_str(b, " remote-grouped |");
        if (ad) rl__buf_append_str(b, " adaptive |");
        if (sq) rl__buf_append_str(b, " sqlite |");
        rl__buf_append_str(b, "\n|---|---|---|");
        for (int j = 0; j < 2 + rg * 2 + ad * 2 + sq * 2; j++) rl__buf_append_str(b, "---|");
        rl__buf_append_str(b, "\n");
        json_array_foreach(json_object_get(p, "cases"), i, kname) {
            const char *k = json_string_value(kname);
            json_t *kc = find_case(r, topo, k);
            if (!kc) continue;
            rl__buf_printf(b, "| %s | %s | ", k, jstr(kc, "label"));
            put_ratio(b, find_summary(r, topo, k, "remote/ordinary", "ns_per_op"));
            if (rg)
                rl__buf_append_str(b, " | "),
                    put_ratio(b, find_summary(r, topo, k, "remote-grouped/ordinary", "ns_per_op"));
            if (ad) rl__buf_append_str(b, " | "), put_ratio(b, find_summary(r, topo, k, "adaptive/best", "ns_per_op"));
            if (sq)
                rl__buf_append_str(b, " | "), put_ratio(b, find_summary(r, topo, k, "sqlite/ordinary", "ns_per_op"));
            const char *arms[5] = {"ordinary", "remote", rg ? "remote-grouped" : NULL, ad ? "adaptive" : NULL,
                                   sq ? "sqlite" : NULL};
            for (int a = 0; a < 5; a++) {
                if (!arms[a]) continue;
                rl__buf_append_str(b, " | ");
                json_t *f = find_arm(r, topo, k, arms[a], "ns_per_op");
                put_time(b, f ? jnumv(f, "median") : NAN);
            }
            rl__buf_append_str(b, " |\n");
        }
        direction_notes(b, r, topo);
        reference_table(b, r, t);
    }
}

/* Absolute values: median of block medians [min, max of all repeats] per arm. */
static void absolute_table(rl_buf *b, json_t *r, const char *topo) {
    static const char *const ms[] = {"ns_per_op",
                                     "bytes_per_op",
                                     "allocs_per_op",
                                     "rows_per_op",
                                     "index_entries_per_op",
                                     "client_reads_per_op",
                                     "mapped_requests_per_op",
                                     "record_loads_per_op",
                                     "kv_bytes_per_op",
                                     NULL};
    static const char *const titles[] = {"time/op",
                                         "B/op",
                                         "allocs/op",
                                         "rows/op",
                                         "index entries/op",
                                         "client reads/op",
                                         "mapped requests/op",
                                         "record loads/op",
                                         "KV bytes/op"};
    json_t *p = json_object_get(r, "protocol");
    size_t i, j;
    json_t *kname, *aname;
    rl__buf_append_str(b, "| case | arm |");
    for (int m = 0; ms[m]; m++) rl__buf_printf(b, " %s |", titles[m]);
    rl__buf_append_str(b, "\n|---|---|");
    for (int m = 0; ms[m]; m++) rl__buf_append_str(b, "---|");
    rl__buf_append_str(b, "\n");
    json_array_foreach(json_object_get(p, "cases"), i, kname) {
        const char *k = json_string_value(kname);
        json_array_foreach(json_object_get(p, "arms"), j, aname) {
            const char *a = json_string_value(aname);
            if (!find_arm(r, topo, k, a, "ns_per_op")) continue;
            rl__buf_printf(b, "| %s | %s |", k, a);
            for (int m = 0; ms[m]; m++) {
                json_t *f = find_arm(r, topo, k, a, ms[m]);
                rl__buf_append_str(b, " ");
                put_metric(b, ms[m], jnumv(f, "median"));
                if (m == 0 && f) {
                    rl__buf_append_str(b, " [");
                    put_time(b, jnumv(f, "min"));
                    rl__buf_append_str(b, ", ");
                    put_time(b, jnumv(f, "max"));
                    rl__buf_append_str(b, "]");
                }
                rl__buf_append_str(b, " |");
            }
            rl__buf_append_str(b, "\n");
        }
    }
}

static void put_rtt(rl_buf *b, json_t *o) {
    if (!o) rl__buf_append_str(b, "—");
    else if (json_object_get(o, "error")) rl__buf_printf(b, "**failed**: %s", jstr(o, "error"));
    else if (!json_is_true(json_object_get(o, "applicable"))) rl__buf_append_str(b, "n/a");
    else
        rl__buf_printf(b, "%.0f / %.0f / %.0f / %.0f µs", jnumv(o, "min_us"), jnumv(o, "p50_us"), jnumv(o, "p99_us"),
                       jnumv(o, "max_us"));
}

static void checks_table(rl_buf *b, json_t *r, const char *topo) {
    size_t i;
    json_t *kc;
    rl__buf_append_str(b, "| case | RTT before (min/p50/p99/max) | RTT after | receipts equal | rows match | "
                          "other CPU | label | processes ok |\n|---|---|---|---|---|---|---|---|\n");
    json_array_foreach(json_object_get(r, "cases"), i, kc) {
        if (strcmp(jstr(kc, "topology"), topo)) continue;
        json_t *ch = json_object_get(kc, "checks"), *cpu = json_object_get(ch, "cpu");
        size_t n = 0, ok = 0, j;
        json_t *pr;
        json_array_foreach(json_object_get(kc, "processes"), j, pr) {
            n++;
            ok += json_is_true(json_object_get(pr, "ok"));
        }
        rl__buf_printf(b, "| %s | ", jstr(kc, "case"));
        put_rtt(b, json_object_get(ch, "rtt_before"));
        rl__buf_append_str(b, " | ");
        put_rtt(b, json_object_get(ch, "rtt_after"));
        rl__buf_printf(b, " | %s | %s | ",
                       json_is_true(json_object_get(ch, "receipts_equal")) ? "yes" : "**NO (failed)**",
                       json_is_true(json_object_get(ch, "worker_rows_match")) ? "yes" : "**NO (failed)**");
        if (json_is_true(json_object_get(cpu, "ok")))
            rl__buf_printf(b, "%.1f%% (%.2f CPU s in %.1f s)", 100 * jnumv(cpu, "other_fraction"),
                           jnumv(cpu, "other_cpu_seconds"), jnumv(cpu, "wall_seconds"));
        else rl__buf_append_str(b, "unverifiable");
        rl__buf_printf(b, " | %s | %zu/%zu |\n", jstr(kc, "label"), ok, n);
    }
}

/* ---- Sentences --------------------------------------------------------------------------------- */

static double arm_med(json_t *r, const char *topo, const char *k, const char *arm, const char *m) {
    json_t *f = find_arm(r, topo, k, arm, m);
    return f ? jnumv(f, "median") : NAN;
}

/* One arm's counters per query for differing_notes: critical round trips, client requests (mapped
 * ones, record loads) and the bytes its replies brought. */
static void arm_counters(rl_buf *b, json_t *r, const char *topo, const char *k, const char *arm) {
    rl__buf_append_str(b, "`");
    rl__buf_append_str(b, arm);
    rl__buf_append_str(b, "` ");
    put_count(b, arm_med(r, topo, k, arm, "round_trips_per_op"));
    rl__buf_append_str(b, " critical round trips, ");
    put_count(b, arm_med(r, topo, k, arm, "requests_per_op"));
    rl__buf_append_str(b, " requests (");
    put_count(b, arm_med(r, topo, k, arm, "mapped_requests_per_op"));
    rl__buf_append_str(b, " mapped, ");
    put_count(b, arm_med(r, topo, k, arm, "record_loads_per_op"));
    rl__buf_append_str(b, " record loads), ");
    double nb = arm_med(r, topo, k, arm, "net_bytes_received_per_op");
    if (isnan(nb)) rl__buf_append_str(b, "n/a");
    else if (nb >= 1e6) rl__buf_printf(b, "%.1f MB", nb / 1e6);
    else rl__buf_printf(b, "%.1f kB", nb / 1e3);
    rl__buf_append_str(b, " received");
}

/* After the reference table: for every case whose ratio points the other way from the report's
 * (both resolved: the report's figure or range on one side of 1, ours a ratio), what our counters
 * say each arm did per query — the evidence a reader weighs against the report's setup. */
static void differing_notes(rl_buf *b, json_t *r, json_t *t) {
    const char *topo = jstr(t, "name"), *kind = jstr(t, "kind");
    size_t i;
    json_t *kname;
    int any = 0;
    json_array_foreach(json_object_get(json_object_get(r, "protocol"), "cases"), i, kname) {
        const char *k = json_string_value(kname);
        json_t *s = find_summary(r, topo, k, "remote/ordinary", "ns_per_op");
        int theirs = ref_direction(find_reference(r, kind, k));
        if (!theirs || !s || strcmp(jstr(s, "status"), "ok")) continue;
        double ours = jnumv(s, "ratio");
        if (direction_of(ours) == theirs) continue;
        if (!any)
            rl__buf_append_str(b, "\nWhere our direction differs from the report's, what each arm did per query "
                                  "here (medians of the blocks; critical round trips include the servers' "
                                  "storage-to-storage ones):\n\n");
        any = 1;
        rl__buf_printf(b, "- **%s** (ours %.3f, the report's %s): ", k, ours,
                       theirs < 0 ? "below 1: remote faster" : "above 1: remote slower");
        arm_counters(b, r, topo, k, "ordinary");
        rl__buf_append_str(b, "; ");
        arm_counters(b, r, topo, k, "remote");
        if (find_arm(r, topo, k, "remote-grouped", "ns_per_op")) {
            rl__buf_append_str(b, "; ");
            arm_counters(b, r, topo, k, "remote-grouped");
        }
        rl__buf_append_str(b, ".\n");
    }
}

/* rl__camp_report_redo — see campaign.h. */
int rl__camp_report_redo(const char *dir, FILE *out, rl__errdetail *err) {
    json_t *r = NULL, *man = NULL;
    int rc = rl__camp_results_load(dir, &r, err);
    if (!rc) {
        char path[RL_CAMP_PATH_MAX + 32];
        json_error_t je;
        snprintf(path, sizeof path, "%s/manifest.json", dir);
        if (!(man = json_load_file(path, 0, &je))) {
            rl__errdetail_append(err, "cannot read %s: %s", path, je.text);
            rc = RL_E_IO_ERROR;
        }
    }
    if (!rc) rc = rl__camp_report_write(dir, r, man, out, err);
    json_decref(r);
    json_decref(man);
    return rc;
}

static void verdict(rl_buf *b, json_t *s) {
    double lo = jnumv(s, "ci_low"), hi = jnumv(s, "ci_high");
    if (hi < 1) rl__buf_append_str(b, "faster");
    else if (lo > 1) rl__buf_append_str(b, "slower");
    else rl__buf_append_str(b, "no difference the interval resolves");
}

static void sentences(rl_buf *b, json_t *r, const char *topo, const char *kind) {
    json_t *p = json_object_get(r, "protocol");
    size_t i;
    json_t *kname;
    json_array_foreach(json_object_get(p, "cases"), i, kname) {
        const char *k = json_string_value(kname);
        json_t *kc = find_case(r, topo, k);
        json_t *s = find_summary(r, topo, k, "remote/ordinary", "ns_per_op");
        if (!kc || !s) continue;
        rl__buf_append_str(b, "- ");
        if (!strcmp(jstr(s, "status"), "ok")) {
            rl__buf_printf(b, "**%s**: remote took %.2f [%.2f, %.2f] of ordinary's time (", k, jnumv(s, "ratio"),
                           jnumv(s, "ci_low"), jnumv(s, "ci_high"));
            put_time(b, arm_med(r, topo, k, "remote", "ns_per_op"));
            rl__buf_append_str(b, " vs ");
            put_time(b, arm_med(r, topo, k, "ordinary", "ns_per_op"));
            rl__buf_append_str(b, " per query: ");
            verdict(b, s);
            rl__buf_append_str(b, "); ");
        } else {
            rl__buf_printf(b, "**%s**: no time ratio (%s); ", k, jstr(s, "status"));
        }
        double idx = arm_med(r, topo, k, "remote", "index_entries_per_op");
        double mreq = arm_med(r, topo, k, "remote", "mapped_requests_per_op");
        double loads = arm_med(r, topo, k, "ordinary", "record_loads_per_op");
        double oreads = arm_med(r, topo, k, "ordinary", "client_reads_per_op");
        double rows = arm_med(r, topo, k, "ordinary", "rows_per_op");
        rl__buf_append_str(b, "it read ");
        put_counted(b, idx, "index entry", "index entries");
        rl__buf_append_str(b, " in ");
        put_counted(b, mreq, "mapped-range request", "mapped-range requests");
        rl__buf_append_str(b, " where ordinary issued ");
        put_counted(b, loads, "record load", "record loads");
        rl__buf_append_str(b, " (");
        put_counted(b, oreads, "client read", "client reads");
        rl__buf_append_str(b, " in all) for ");
        put_counted(b, rows, "row", "rows");
        double rt_o = arm_med(r, topo, k, "ordinary", "round_trips_per_op");
        double rt_r = arm_med(r, topo, k, "remote", "round_trips_per_op");
        if (!strcmp(kind, "embedded")) {
            rl__buf_append_str(b, "; embedded, so no request crossed a network (0 round trips)");
        } else if (isnan(rt_o) || isnan(rt_r)) {
            rl__buf_append_str(b, "; requests and round trips are not counted on this backend yet");
        } else {
            rl__buf_append_str(b, "; round trips per query: ordinary ");
            put_count(b, rt_o);
            rl__buf_append_str(b, ", remote ");
            put_count(b, rt_r);
        }
        json_t *sq = find_summary(r, topo, k, "sqlite/ordinary", "ns_per_op");
        if (sq && !strcmp(jstr(sq, "status"), "ok")) {
            rl__buf_printf(b, ". SQLite took %.2f [%.2f, %.2f] of ordinary's time (", jnumv(sq, "ratio"),
                           jnumv(sq, "ci_low"), jnumv(sq, "ci_high"));
            put_time(b, arm_med(r, topo, k, "sqlite", "ns_per_op"));
            rl__buf_append_str(b, ")");
        }
        json_t *by = find_summary(r, topo, k, "remote/ordinary", "bytes_per_op");
        if (by && !strcmp(jstr(by, "status"), "ok"))
            rl__buf_printf(b, "; remote allocated %.2f [%.2f, %.2f] of ordinary's bytes", jnumv(by, "ratio"),
                           jnumv(by, "ci_low"), jnumv(by, "ci_high"));
        rl__buf_append_str(b, ".");
        if (!strcmp(jstr(kc, "label"), "contaminated")) rl__buf_append_str(b, " *Contaminated case.*");
        rl__buf_append_str(b, "\n");
    }
}

/* ---- The report -------------------------------------------------------------------------------- */

static void dataset_section(rl_buf *b, json_t *t) {
    size_t i;
    json_t *d;
    rl__buf_append_str(b, "\n**Checks before timing.** Datasets, checked with the integrity checker:\n\n"
                          "| variant | database | store | records | padding | index entries | integrity_ok |\n"
                          "|---|---|---|---|---|---|---|\n");
    json_array_foreach(json_object_get(t, "datasets"), i, d) {
        json_t *ic = json_object_get(d, "integrity");
        rl__buf_printf(b, "| %s | `%s` | `%s` | ", jstr(d, "variant"), jstr(d, "url"), jstr(d, "store"));
        put_int(b, jnumv(ic, "records"));
        rl__buf_append_str(b, " | ");
        put_int(b, (double)json_integer_value(json_object_get(d, "padding")));
        rl__buf_append_str(b, " | ");
        put_int(b, jnumv(ic, "index_entries"));
        if (json_object_get(d, "error")) rl__buf_printf(b, " | **failed**: %s |\n", jstr(d, "error"));
        else rl__buf_printf(b, " | %s |\n", json_is_true(json_object_get(d, "integrity_ok")) ? "true" : "**false**");
    }
    rl__buf_append_str(b, "\nDefect controls (each on a fresh scratch store holding a copy of the dataset's first "
                          "split records; each must make the checker fail):\n\n"
                          "| defect | integrity_ok before | integrity_ok after | defects found | passed |\n"
                          "|---|---|---|---|---|\n");
    json_array_foreach(json_object_get(t, "defect_controls"), i, d) {
        rl__buf_printf(b, "| %s | %s | %s | ", jstr(d, "defect"),
                       json_is_true(json_object_get(d, "clean_before")) ? "true" : "false",
                       json_is_true(json_object_get(d, "integrity_ok_after")) ? "true" : "false");
        size_t j;
        json_t *f;
        json_array_foreach(json_object_get(d, "found"), j, f)
            rl__buf_printf(b, "%s%s", j ? ", " : "", json_string_value(f));
        rl__buf_printf(b, " | %s |\n", json_is_true(json_object_get(d, "passed")) ? "yes" : "**NO**");
    }
    rl__buf_append_str(b, "\nArms: ");
    json_array_foreach(json_object_get(t, "arms"), i, d) {
        rl__buf_printf(b, "%s%s %s", i ? "; " : "", jstr(d, "arm"),
                       json_is_true(json_object_get(d, "available")) ? "available" : "**not available**");
        if (!json_is_true(json_object_get(d, "available"))) rl__buf_printf(b, " (%s)", jstr(d, "reason"));
    }
    size_t agree = 0, n = json_array_size(json_object_get(t, "rows_check"));
    json_array_foreach(json_object_get(t, "rows_check"), i, d) agree += json_is_true(json_object_get(d, "agree"));
    rl__buf_printf(b,
                   ".\n\nRows check: the available arms returned the same rows in the same order in %zu of %zu "
                   "cases (each arm run once per case before timing; every timed repeat is checked against it too).\n",
                   agree, n);
}

/* The teams `place` used and, for placement "reports", its plan: the planned server-disjoint
 * fraction per split case and the receipt's count that checked it. */
static void placement_section(rl_buf *b, json_t *t) {
    json_t *pl = json_object_get(t, "placement"), *plan = json_object_get(pl, "plan"), *v;
    const char *k;
    if (!pl) return;
    rl__buf_printf(b, "\nPlacement: %s (placed in %.1f s).", jstr(pl, "teams"), jnumv(pl, "seconds"));
    if (plan) {
        rl__buf_printf(b,
                       " The reports' placement: small (and skip3): %s; split: %s — %lld of %lld records on the "
                       "index's team, in %lld record ranges; planned server-disjoint fraction per case:",
                       jstr(plan, "small"), jstr(plan, "split"),
                       (long long)json_integer_value(json_object_get(plan, "colocated_records")),
                       (long long)json_integer_value(json_object_get(plan, "records")),
                       (long long)json_integer_value(json_object_get(plan, "record_ranges")));
        int first = 1;
        json_object_foreach(json_object_get(plan, "planned_server_disjoint_fraction"), k, v) {
            rl__buf_printf(b, "%s %s %.3f", first ? "" : ",", k, json_number_value(v));
            first = 0;
        }
        rl__buf_printf(b, "; the receipt after placing counted %lld server-disjoint records (as planned).",
                       (long long)json_integer_value(json_object_get(plan, "receipt_server_disjoint")));
    }
    rl__buf_append_str(b, "\n");
}

/* The throughput phase of a topology: one row per (case, arm, clients). */
static void throughput_table(rl_buf *b, json_t *r, const char *topo) {
    size_t i;
    json_t *e;
    int any = 0;
    json_array_foreach(json_object_get(r, "throughput"), i, e) {
        if (strcmp(jstr(e, "topology"), topo)) continue;
        if (!any)
            rl__buf_printf(b,
                           "\n### Throughput\n\nN client processes of one case and arm at once, each in a closed "
                           "loop for %g s (the same wall-clock window); queries/s summed over the clients; latency "
                           "percentiles of every query of the window (log-linear histogram, within 1.6 %%); CPU "
                           "seconds per query of the clients (their own /proc/PID/stat over the window) and of the "
                           "servers the campaign started (/proc/PID/stat at the window's start and end; clock "
                           "ticks of 10 ms).\n\n| case | arm | clients | queries/s | p50 | p99 | client CPU/query | "
                           "server CPU/query | ok |\n|---|---|---|---|---|---|---|---|---|\n",
                           jnumv(e, "seconds"));
        any = 1;
        rl__buf_printf(b, "| %s | %s | %lld | ", jstr(e, "case"), jstr(e, "arm"),
                       (long long)json_integer_value(json_object_get(e, "clients")));
        double qps = jnumv(e, "queries_per_second");
        if (isnan(qps)) rl__buf_append_str(b, "n/a");
        else put_int(b, round(qps));
        rl__buf_append_str(b, " | ");
        put_time(b, jnumv(e, "p50_ns"));
        rl__buf_append_str(b, " | ");
        put_time(b, jnumv(e, "p99_ns"));
        rl__buf_append_str(b, " | ");
        put_time(b, 1e9 * jnumv(e, "client_cpu_seconds_per_query"));
        rl__buf_append_str(b, " | ");
        if (json_integer_value(json_object_get(e, "servers")) == 0) rl__buf_append_str(b, "n/a (no servers)");
        else put_time(b, 1e9 * jnumv(e, "server_cpu_seconds_per_query"));
        rl__buf_printf(b, " | %s |\n", json_is_true(json_object_get(e, "ok")) ? "yes" : "**failed**");
    }
}

static void put_plots(rl_buf *b, json_t *r, const char *topo) {
    json_t *pl = json_object_get(r, "plots");
    size_t i;
    json_t *f;
    int any = 0;
    json_array_foreach(json_object_get(pl, "files"), i, f) {
        const char *s = json_string_value(f);
        if (!strstr(s, topo) || !strstr(s, ".svg")) continue;
        rl__buf_printf(b, "%s![%s](%s)", any ? " " : "\n", s, s);
        any = 1;
    }
    if (any) rl__buf_append_str(b, "\n");
    else if (json_object_get(pl, "error")) rl__buf_printf(b, "\nPlots were not drawn: %s\n", jstr(pl, "error"));
}

int rl__camp_report_write(const char *dir, json_t *r, json_t *manifest, FILE *out, rl__errdetail *err) {
    json_t *p = json_object_get(r, "protocol"), *ds = json_object_get(p, "dataset"), *dz = json_object_get(p, "design"),
           *st = json_object_get(p, "statistics"), *ck = json_object_get(p, "checks");
    rl_buf b, main;
    size_t i, n_cases = 0, n_cont = 0;
    json_t *t, *kc;
    char path[RL_CAMP_PATH_MAX + 32];
    rl__buf_init(&b);
    rl__buf_init(&main);
    json_array_foreach(json_object_get(r, "cases"), i, kc) {
        n_cases++;
        n_cont += !strcmp(jstr(kc, "label"), "contaminated");
    }
    rl__buf_printf(&b, "# Campaign report: %s\n\n%s\n\n", jstr(r, "protocol_name"), jstr(p, "description"));
    rl__buf_printf(&b,
                   "Protocol `%s` (%s), SHA-256 `%s`. Started %s, finished %s (%.0f s). Raw samples, every check "
                   "and the summary: `results.json.zst` (zstd-compressed JSON); the same samples and summary as CSV: "
                   "`samples.csv` (one row per sample) and `summary.csv` (one row per case, arm and metric, with "
                   "the ratio and its interval); this report as one page: `report.html`; machine, versions and "
                   "binaries: `manifest.json`.\n\n",
                   jstr(r, "protocol_name"), jstr(r, "protocol_source"), jstr(r, "protocol_sha256"),
                   jstr(r, "started_utc"), jstr(r, "finished_utc"), jnumv(r, "wall_seconds"));
    if (json_is_true(json_object_get(r, "ok"))) rl__buf_append_str(&b, "**Every check passed and every process ran.**");
    else
        rl__buf_printf(&b, "**%lld checks failed and %lld processes failed** (see Failures at the end).",
                       (long long)json_integer_value(json_object_get(r, "failed_checks")),
                       (long long)json_integer_value(json_object_get(r, "failed_processes")));
    if (n_cont)
        rl__buf_printf(
            &b,
            " **%zu of %zu cases are contaminated**: other processes used more than %.0f%% of the "
            "machine's CPU while they ran; their figures are kept and labelled, and should be read as noisy.",
            n_cont, n_cases, 100 * jnumv(ck, "contamination_threshold"));
    rl__buf_append_str(&b, "\n\n## Design\n\n");
    rl__buf_printf(&b,
                   "- Dataset: %lld `Order` records per variant with the VALUE index `price_idx` (price 0..999 "
                   "from seed %lld): `small` (one key-value per record) and `split` (%lld bytes of padding: two "
                   "chunks per record); `skip3` cases query `small` and skip 3 entries (pushed down).\n",
                   (long long)json_integer_value(json_object_get(ds, "records")),
                   (long long)json_integer_value(json_object_get(ds, "seed")),
                   (long long)json_integer_value(json_object_get(ds, "split_padding")));
    rl__buf_printf(&b,
                   "- %lld blocks × arms; the order of the arms alternates between blocks (as listed in even "
                   "blocks, reversed in odd ones); every (block, case, arm) is a fresh process running %lld "
                   "repeats of a %g s timed loop after a %g s warm-up; SCAN_AND_FETCH pipeline depth %lld.\n",
                   (long long)json_integer_value(json_object_get(dz, "blocks")),
                   (long long)json_integer_value(json_object_get(dz, "repeats")), jnumv(dz, "seconds"),
                   jnumv(dz, "warmup_seconds"), (long long)json_integer_value(json_object_get(dz, "pipeline_depth")));
    rl__buf_printf(&b,
                   "- Per process the median of its repeats; per block the ratio of each arm to its baseline "
                   "(remote/ordinary; remote-grouped/ordinary, the remote fetch with grouped secondaries, multi "
                   "topologies only; adaptive/best = adaptive, which reads with grouped secondaries, over the best of "
                   "ordinary, remote and remote-grouped where it runs, in that block; "
                   "sqlite/ordinary); per case the geometric mean of the block ratios with a nominal %.0f%% "
                   "block-bootstrap percentile interval (%lld resamples, seed %lld). Lower is better.\n",
                   100 * jnumv(st, "level"), (long long)json_integer_value(json_object_get(st, "resamples")),
                   (long long)json_integer_value(json_object_get(st, "seed")));
    rl__buf_printf(&b,
                   "- Checks around every case: RTT probe before and after, placement receipts before and after "
                   "(must be equal), CPU used by other processes (contaminated above %.0f%% of the machine).\n",
                   100 * jnumv(ck, "contamination_threshold"));
    rl__buf_append_str(&b, "\n## Main table\n");
    rl__camp_report_main_table(r, &main);
    rl__buf_append(&b, main.data, main.len);
    json_array_foreach(json_object_get(r, "topologies"), i, t) {
        const char *topo = jstr(t, "name");
        rl__buf_printf(&b, "\n## Topology `%s` (%s, %lld µs one-way delay)\n", topo, jstr(t, "kind"),
                       (long long)json_integer_value(json_object_get(t, "delay_us")));
        if (!strcmp(jstr(t, "status"), "not_available")) {
            rl__buf_printf(&b, "\nNot run: %s.\n", jstr(t, "reason"));
            continue;
        }
        if (json_object_get(t, "datasets")) dataset_section(&b, t);
        placement_section(&b, t);
        if (!topo_ran(t)) {
            rl__buf_printf(&b, "\n**Not timed**: %s.\n", jstr(t, "status"));
            continue;
        }
        for (int c = 0; c < RL_CAMP_COMPARISONS; c++) {
            const char *cmp = rl__camp_comparison_name(c);
            if (!has_comparison(r, topo, cmp)) continue;
            rl__buf_printf(&b, "\n### %s (ratio [interval] per metric)\n\n", cmp);
            ratio_table(&b, r, topo, cmp, strcmp(cmp, "sqlite/ordinary") ? 7 : 4);
        }
        rl__buf_append_str(&b, "\n### Absolute values\n\nMedians of the block medians (time also with the raw "
                               "min and max of all repeats).\n\n");
        absolute_table(&b, r, topo);
        rl__buf_append_str(&b, "\n### Checks around every case\n\n");
        checks_table(&b, r, topo);
        rl__buf_append_str(&b, "\nRestoration (after the last case, the delay removed): ");
        put_rtt(&b, json_object_get(t, "restoration"));
        json_t *rest = json_object_get(t, "restoration");
        if (rest && !json_is_true(json_object_get(rest, "applicable")))
            rl__buf_printf(&b, " (%s)", jstr(rest, "reason"));
        rl__buf_append_str(&b, ".\n\n### What happened\n\n");
        sentences(&b, r, topo, jstr(t, "kind"));
        throughput_table(&b, r, topo);
        put_plots(&b, r, topo);
    }
    rl__buf_append_str(&b, "\n## Failures\n\n");
    json_t *f;
    if (json_array_size(json_object_get(r, "failures")) == 0) rl__buf_append_str(&b, "None.\n");
    json_array_foreach(json_object_get(r, "failures"), i, f) {
        rl__buf_printf(&b, "- %s (%s)", jstr(f, "what"), jstr(f, "kind"));
        if (json_object_get(f, "topology")) rl__buf_printf(&b, " %s", jstr(f, "topology"));
        if (json_object_get(f, "case")) rl__buf_printf(&b, " %s", jstr(f, "case"));
        rl__buf_printf(&b, ": %s\n", jstr(f, "detail"));
    }
    int rc = rl__buf_error(&b);
    snprintf(path, sizeof path, "%s/report.md", dir);
    FILE *fp = rc ? NULL : fopen(path, "w");
    if (!rc && (!fp || fwrite(b.data, 1, b.len, fp) != b.len)) {
        rl__errdetail_append(err, "cannot write %s", path);
        rc = RL_E_IO_ERROR;
    }
    if (fp && fclose(fp) && !rc) {
        rl__errdetail_append(err, "cannot write %s", path);
        rc = RL_E_IO_ERROR;
    }
    if (!rc) rc = rl__camp_html_write(dir, (const char *)b.data, b.len, manifest, err);
    if (out && !rc) {
        fprintf(out, "%s", main.data);
        fprintf(out,
                "\nreport: %s/report.md (and report.html)\nsamples: %s/" RL_CAMP_SAMPLES_CSV
                "\nsummary: %s/" RL_CAMP_SUMMARY_CSV "\nresults: %s/" RL_CAMP_RESULTS_NAME
                "\nmanifest: %s/manifest.json\n",
                dir, dir, dir, dir, dir);
        json_t *pl = json_object_get(r, "plots");
        json_array_foreach(json_object_get(pl, "files"), i, f) fprintf(out, "plot: %s/%s\n", dir, json_string_value(f));
        if (json_object_get(pl, "error")) fprintf(out, "plots not drawn: %s\n", jstr(pl, "error"));
    }
    rl__buf_release(&b);
    rl__buf_release(&main);
    return rc;
}
