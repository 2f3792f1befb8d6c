/* report_plot.c — the campaign's plots, drawn by gnuplot (gnuplot-nox, installed by
 * scripts/install-deps.sh) from data files written next to them:
 *
 *   plots/ratios-TOPO.{svg,png}  per case the time ratio of remote/ordinary (and
 *                                remote-grouped/ordinary, adaptive/best, sqlite/ordinary when they ran) with its bootstrap interval, log
 *                                scale, a dashed line at 1
 *   plots/times-TOPO.{svg,png}   per case the absolute time per query of each arm: the median of
 *                                the block medians, bars from the raw min to max, log scale
 *   plots/throughput-TOPO.{svg,png}  the throughput phase: queries/s against client processes (log
 *                                2), one line per (arm, case)
 *   plots/NAME.dat, NAME.gp      the data and the scripts (rerun with `gnuplot FILE.gp`)
 *
 * A contaminated case (its label) is marked on both plots with a large red open circle. The ratios
 * plot of a single or multi topology also shows the reference report's figure for each case where
 * one was published (results' "reference": C3 for single, M2 for multi): its ratio with its interval
 * as a black diamond, or the range published over several cases as a grey bar.
 *
 * PNG: gnuplot-nox has the cairo terminals (pngcairo); when the terminal is missing, the libgd
 * `png` terminal is tried, and when neither works the PNG files are skipped and the reason
 * recorded. gnuplot runs as a child process with a 60 s deadline; no gnuplot at all is recorded
 * as such, never a failure of the campaign.
 */
#include <math.h>
#include <string.h>

#include "bench/campaign_int.h"
#include "bench/campaign_proc.h"

static const char *jstr(json_t *o, const char *k) {
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

static json_t *find_summary(json_t *r, const char *topo, const char *kase, const char *cmp) {
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(r, "summary"), i, s) {
        if (!strcmp(jstr(s, "topology"), topo) && !strcmp(jstr(s, "case"), kase) &&
            !strcmp(jstr(s, "comparison"), cmp) && !strcmp(jstr(s, "metric"), "ns_per_op"))
            return s;
    }
    return NULL;
}

static json_t *find_arm(json_t *r, const char *topo, const char *kase, const char *arm) {
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(r, "arm_summary"), i, s) {
        if (!strcmp(jstr(s, "topology"), topo) && !strcmp(jstr(s, "case"), kase) && !strcmp(jstr(s, "arm"), arm))
            return json_object_get(json_object_get(s, "metrics"), "ns_per_op");
    }
    return NULL;
}

/* The reference report's figure of (topology kind, case) in the results, or NULL. */
static json_t *find_reference(json_t *r, const char *kind, const char *kase) {
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(json_object_get(r, "reference"), "figures"), i, f) {
        if (!strcmp(jstr(f, "topology_kind"), kind) && !strcmp(jstr(f, "case"), kase)) return f;
    }
    return NULL;
}

/* 1 when the case of topology is labelled contaminated. */
static int contaminated(json_t *r, const char *topo, const char *kase) {
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(r, "cases"), i, c) {
        if (!strcmp(jstr(c, "topology"), topo) && !strcmp(jstr(c, "case"), kase))
            return !strcmp(jstr(c, "label"), "contaminated");
    }
    return 0;
}

static void put_num(FILE *f, json_t *v, double scale) {
    if (json_is_number(v) && isfinite(json_number_value(v))) fprintf(f, " %.6g", json_number_value(v) * scale);
    else fprintf(f, " ?");
}

/* Run gnuplot on script; RL_OK when it exited 0. *out_missing: gnuplot was not found. */
static int gnuplot(const char *script, int *out_missing, rl__errdetail *err) {
    char *argv[] = {"gnuplot", (char *)script, NULL};
    rl__camp_child ch;
    *out_missing = 0;
    int rc = rl__camp_child_run(argv, 60, &ch, err);
    if (rc) {
    } else {
        *out_missing = ch.exit_code == 127;
        if (ch.exit_code != 0) {
            rl__errdetail_append(err, "gnuplot %s: exit %d: %.300s", script, ch.exit_code, ch.err.data);
            rc = RL_E_IO_ERROR;
        }
        rl__camp_child_release(&ch);
    }
    return rc;
}

/* The columns of the data files: ratios-TOPO.dat has index, case, then ratio ci_low ci_high per
 * comparison (rl__camp_comparison_name order), contaminated, then the reference's three; times-TOPO.dat
 * index, case, median min max per arm (enum order), contaminated. cols[] of write_script: one flag
 * per comparison, one per arm, then contaminated, then the reference's kind (1 ratio, 2 range). */
#define NCMP RL_CAMP_COMPARISONS
#define NARM RL_CAMP_ARM_KINDS
#define COL_CONT (NCMP + NARM)
#define COL_REF (NCMP + NARM + 1)

/* Write one script drawing both plots of topo with terminal term into files ending in ext. */
static int write_script(const char *path, const char *dir, const char *topo, const char *term, const char *ext, int n,
                        const int *cols) {
    FILE *f = fopen(path, "w");
    if (!f) return RL_E_IO_ERROR;
    fprintf(f,
            "# generated by rlbench campaign — do not edit\nset terminal %s\nset datafile missing '?'\n"
            "set grid ytics\nset xtics rotate by -40 scale 0 font ',9'\nset key top left\nset logscale y\n"
            "set xrange [-0.5:%d.5]\nset bmargin 9\n",
            term, n - 1);
    fprintf(f,
            "set output '%s/plots/ratios-%s.%s'\nset title \"%s: time ratio per case (geometric mean of the block "
            "ratios, bootstrap interval); lower is better\"\nset ylabel 'ratio'\n"
            "set arrow 1 from -0.5,1 to %d.5,1 nohead dt 2\nplot ",
            dir, topo, ext, topo, n - 1);
    fprintf(f, "'%s/plots/ratios-%s.dat' using 1:(1/0):xtic(2) notitle", dir, topo);
    for (int c = 0; c < NCMP; c++) {
        if (!cols[c]) continue;
        double off = (c - (NCMP - 1) / 2.0) * 0.12;
        fprintf(f, ", '%s/plots/ratios-%s.dat' using ($1%+.2f):%d:%d:%d with yerrorbars pt %d title '%s'", dir, topo,
                off, 3 + 3 * c, 4 + 3 * c, 5 + 3 * c, 7 + c, rl__camp_comparison_name(c));
    }
    const int rref = 4 + 3 * NCMP, rcont = 3 + 3 * NCMP, tcont = 3 + 3 * NARM;
    /* the reference report's figures: its ratio with its interval (black diamonds), or the range it
     * published over several cases (a grey bar without a point) */
    if (cols[COL_REF] & 1)
        fprintf(f,
                ", '%s/plots/ratios-%s.dat' using ($1+0.32):%d:%d:%d with yerrorbars pt 13 ps 1.3 lc rgb 'black' "
                "title 'reference report (ratio, interval)'",
                dir, topo, rref, rref + 1, rref + 2);
    if (cols[COL_REF] & 2)
        fprintf(f,
                ", '%s/plots/ratios-%s.dat' using ($1+0.32):(valid(%d) ? 1/0 : ($%d+$%d)/2):%d:%d with yerrorbars "
                "ps 0 lw 3 lc rgb 'gray50' title 'reference report (published range only)'",
                dir, topo, rref, rref + 1, rref + 2, rref + 1, rref + 2);
    /* contaminated cases: a large open circle at their first ratio (or at 1) */
    if (cols[COL_CONT])
        fprintf(f,
                ", '%s/plots/ratios-%s.dat' using 1:($%d>0 ? (valid(3) ? $3 : (valid(6) ? $6 : 1)) : 1/0) with points "
                "pt 6 ps 3 lc rgb '#d62728' title 'contaminated case'",
                dir, topo, rcont);
    fprintf(f,
            "\nunset arrow 1\nset output '%s/plots/times-%s.%s'\nset title \"%s: time per query per arm (median of "
            "the block medians, bars: min to max of all repeats)\"\nset ylabel 'µs per query'\nplot ",
            dir, topo, ext, topo);
    fprintf(f, "'%s/plots/times-%s.dat' using 1:(1/0):xtic(2) notitle", dir, topo);
    for (int a = 0; a < NARM; a++) {
        if (!cols[NCMP + a]) continue;
        double off = (a - (NARM - 1) / 2.0) * 0.1;
        fprintf(f, ", '%s/plots/times-%s.dat' using ($1%+.2f):%d:%d:%d with yerrorbars pt %d title '%s'", dir, topo,
                off, 3 + 3 * a, 4 + 3 * a, 5 + 3 * a, 5 + a, rl__camp_arm_name((rl__camp_arm)a));
    }
    if (cols[COL_CONT])
        fprintf(f,
                ", '%s/plots/times-%s.dat' using 1:($%d>0 ? (valid(3) ? $3 : $6) : 1/0) with points pt 6 ps 3 "
                "lc rgb '#d62728' title 'contaminated case'",
                dir, topo, tcont);
    fprintf(f, "\n");
    return fclose(f) ? RL_E_IO_ERROR : RL_OK;
}

/* The throughput plot of topology topo: queries/s against clients (log 2), one line per (case, arm),
 * from the results' "throughput"; term and ext as write_script. Writes the data file and the
 * script; returns 0 when there is nothing to plot, 1 when the script is ready, -1 on an I/O error. */
static int throughput_script(const char *dir, json_t *r, const char *topo, const char *term, const char *ext,
                             char *script, size_t cap) {
    char path[RL_CAMP_PATH_MAX + 64];
    json_t *tps = json_object_get(r, "throughput"), *e;
    size_t i;
    int n_series = 0;
    char series[RL_CAMP_MAX_TP_CASES * RL_CAMP_ARM_KINDS][2 * RL_CAMP_NAME_MAX];
    json_array_foreach(tps, i, e) {
        char name[2 * RL_CAMP_NAME_MAX];
        if (strcmp(jstr(e, "topology"), topo)) continue;
        snprintf(name, sizeof name, "%s %s", jstr(e, "arm"), jstr(e, "case"));
        int seen = 0;
        for (int j = 0; j < n_series; j++) seen |= !strcmp(series[j], name);
        if (!seen && n_series < (int)(sizeof series / sizeof series[0]))
            snprintf(series[n_series++], sizeof name, "%s", name);
    }
    if (!n_series) return 0;
    snprintf(path, sizeof path, "%s/plots/throughput-%s.dat", dir, topo);
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fprintf(f, "# blocks per (arm, case) in the order of the plot's titles: clients queries_per_second\n");
    for (int j = 0; j < n_series; j++) {
        fprintf(f, "%s# %s\n", j ? "\n\n" : "", series[j]);
        json_array_foreach(tps, i, e) {
            char name[2 * RL_CAMP_NAME_MAX];
            snprintf(name, sizeof name, "%s %s", jstr(e, "arm"), jstr(e, "case"));
            if (strcmp(jstr(e, "topology"), topo) || strcmp(name, series[j])) continue;
            fprintf(f, "%lld", (long long)json_integer_value(json_object_get(e, "clients")));
            put_num(f, json_object_get(e, "queries_per_second"), 1);
            fprintf(f, "\n");
        }
    }
    if (fclose(f)) return -1;
    snprintf(script, cap, "%s/plots/throughput-%s-%s.gp", dir, topo, ext);
    f = fopen(script, "w");
    if (!f) return -1;
    fprintf(f,
            "# generated by rlbench campaign — do not edit\nset terminal %s\nset datafile missing '?'\n"
            "set grid\nset key top left\nset logscale x 2\nset xlabel 'client processes'\n"
            "set ylabel 'queries per second'\nset yrange [0:*]\nset output '%s/plots/throughput-%s.%s'\n"
            "set title \"%s: throughput, closed loop (queries/s summed over the clients)\"\nplot ",
            term, dir, topo, ext, topo);
    for (int j = 0; j < n_series; j++)
        fprintf(f, "%s'%s/plots/throughput-%s.dat' index %d using 1:2 with linespoints pt %d title '%s'", j ? ", " : "",
                dir, topo, j, 5 + j, series[j]);
    fprintf(f, "\n");
    return fclose(f) ? -1 : 1;
}

int rl__camp_plots(const char *dir, json_t *r, json_t **out, rl__errdetail *err) {
    json_t *res = json_pack("{s:n, s:n, s:[]}", "gnuplot", "png_terminal", "files");
    json_t *files = json_object_get(res, "files"), *p = json_object_get(r, "protocol");
    char path[RL_CAMP_PATH_MAX + 64], script[RL_CAMP_PATH_MAX + 64];
    size_t ti, i;
    json_t *t, *kname;
    rl__errdetail plot_err;
    int rc = RL_OK, missing = 0, png_state = 0; /* 0 untried, 1 pngcairo, 2 png, 3 none */
    rl__errdetail_init(&plot_err, NULL);
    *out = res;
    json_array_foreach(json_object_get(r, "topologies"), ti, t) {
        const char *topo = jstr(t, "name");
        if (strcmp(jstr(t, "status"), "ran")) continue;
        int cols[COL_REF + 1] = {0}, n = 0; /* comparisons, arms, any contaminated case, any reference */
        snprintf(path, sizeof path, "%s/plots/ratios-%s.dat", dir, topo);
        FILE *fr = fopen(path, "w");
        snprintf(path, sizeof path, "%s/plots/times-%s.dat", dir, topo);
        FILE *ft = fopen(path, "w");
        if (!fr || !ft) {
            if (fr) fclose(fr);
            if (ft) fclose(ft);
            rl__errdetail_append(err, "cannot write %s", path);
            rc = RL_E_IO_ERROR;
            break;
        }
        fprintf(fr, "# index case, then ratio ci_low ci_high of remote/ordinary, remote-grouped/ordinary, "
                    "adaptive/best, sqlite/ordinary, "
                    "then contaminated (1/0), then the reference report's ratio and its interval (or the range it "
                    "published), ? where not published\n");
        fprintf(ft, "# index case, then median min max in µs of ordinary, remote, remote-grouped, adaptive, sqlite, "
                    "then "
                    "contaminated (1/0)\n");
        json_array_foreach(json_object_get(p, "cases"), i, kname) {
            const char *k = json_string_value(kname);
            fprintf(fr, "%d %s", n, k);
            fprintf(ft, "%d %s", n, k);
            for (int c = 0; c < NCMP; c++) {
                json_t *s = find_summary(r, topo, k, rl__camp_comparison_name(c));
                cols[c] |= s && json_is_number(json_object_get(s, "ratio"));
                put_num(fr, json_object_get(s, "ratio"), 1);
                put_num(fr, json_object_get(s, "ci_low"), 1);
                put_num(fr, json_object_get(s, "ci_high"), 1);
            }
            for (int a = 0; a < NARM; a++) {
                json_t *f = find_arm(r, topo, k, rl__camp_arm_name((rl__camp_arm)a));
                cols[NCMP + a] |= f && json_is_number(json_object_get(f, "median"));
                put_num(ft, json_object_get(f, "median"), 1e-3);
                put_num(ft, json_object_get(f, "min"), 1e-3);
                put_num(ft, json_object_get(f, "max"), 1e-3);
            }
            int cont = contaminated(r, topo, k);
            cols[COL_CONT] |= cont;
            fprintf(fr, " %d", cont);
            json_t *ref = find_reference(r, jstr(t, "kind"), k);
            int has_ci = ref && json_is_number(json_object_get(ref, "ci_low"));
            cols[COL_REF] |= !ref ? 0 : json_is_number(json_object_get(ref, "ratio")) ? 1 : 2;
            put_num(fr, json_object_get(ref, "ratio"), 1);
            put_num(fr, json_object_get(ref, has_ci ? "ci_low" : "range_low"), 1);
            put_num(fr, json_object_get(ref, has_ci ? "ci_high" : "range_high"), 1);
            fprintf(fr, "\n");
            fprintf(ft, " %d\n", cont);
            n++;
        }
        fclose(fr);
        fclose(ft);
        /* the throughput plot (its own script) */
        int tsc =
            throughput_script(dir, r, topo, "svg size 900,500 dynamic font 'sans,11'", "svg", script, sizeof script);
        if (tsc < 0) {
            rl__errdetail_append(err, "cannot write the throughput plot of %s", topo);
            rc = RL_E_IO_ERROR;
            break;
        }
        rl__errdetail_clear(&plot_err);
        if (tsc > 0 && gnuplot(script, &missing, &plot_err) == RL_OK) {
            json_array_append_new(files, json_sprintf("plots/throughput-%s.svg", topo));
            if (throughput_script(dir, r, topo, "pngcairo size 900,500 font 'sans,10'", "png", script, sizeof script) >
                    0 &&
                gnuplot(script, &missing, &plot_err) == RL_OK)
                json_array_append_new(files, json_sprintf("plots/throughput-%s.png", topo));
        }
        int any_ratio = 0;
        for (int c = 0; c < NCMP; c++) any_ratio |= cols[c];
        if (n == 0 || !any_ratio) continue;
        snprintf(script, sizeof script, "%s/plots/plots-%s-svg.gp", dir, topo);
        if (write_script(script, dir, topo, "svg size 1100,560 dynamic font 'sans,11'", "svg", n, cols)) {
            rl__errdetail_append(err, "cannot write %s", script);
            rc = RL_E_IO_ERROR;
            break;
        }
        rl__errdetail_clear(&plot_err);
        if (gnuplot(script, &missing, &plot_err)) {
            json_object_set_new(res, "error",
                                json_string(missing ? "gnuplot is not installed (scripts/install-deps.sh "
                                                      "installs gnuplot-nox)"
                                                    : rl__errdetail_get(&plot_err)));
            break;
        }
        json_object_set_new(res, "gnuplot", json_string("gnuplot"));
        json_array_append_new(files, json_sprintf("plots/ratios-%s.svg", topo));
        json_array_append_new(files, json_sprintf("plots/times-%s.svg", topo));
        static const char *const pngs[2] = {"pngcairo size 1100,560 font 'sans,10'", "png size 1100,560"};
        for (int attempt = png_state ? png_state - 1 : 0; attempt < 2 && png_state != 3; attempt++) {
            snprintf(script, sizeof script, "%s/plots/plots-%s-png.gp", dir, topo);
            if (write_script(script, dir, topo, pngs[attempt], "png", n, cols)) break;
            rl__errdetail_clear(&plot_err);
            if (gnuplot(script, &missing, &plot_err) == RL_OK) {
                png_state = attempt + 1;
                json_object_set_new(res, "png_terminal", json_string(attempt ? "png" : "pngcairo"));
                json_array_append_new(files, json_sprintf("plots/ratios-%s.png", topo));
                json_array_append_new(files, json_sprintf("plots/times-%s.png", topo));
                break;
            }
            if (attempt == 1) {
                png_state = 3;
                json_object_set_new(res, "png_error", json_string(rl__errdetail_get(&plot_err)));
            }
        }
    }
    return rc;
}
