/* report_csv.c — the campaign's two CSV files, written from the results document alone, and the
 * CSV reader that reads them back (rl__camp_csv_write, rl__camp_csv_parse; campaign_int.h).
 *
 *   samples.csv  one row per sample (one repeat of one worker process): topology, case, arm, block,
 *                repeat, position, seq, ops, seconds, the twelve per-op metrics, rows_hash,
 *                last_rows — results.json's "samples", in its order
 *   summary.csv  one row per (topology, case, arm, metric): the arm's median of the block medians,
 *                the raw min and max of its repeats, n_blocks, n_samples; and, when the arm has a
 *                comparison (remote/ordinary, remote-grouped/ordinary, adaptive/best,
 *                sqlite/ordinary), its baseline, the
 *                ratio (geometric mean of the block ratios), ci_low, ci_high, the interval's level
 *                and the ratio's status; the baseline arm's rows leave those columns empty
 *
 *   throughput.csv  one row per (topology, case, arm, clients) of the throughput phase: the
 *                results' "throughput" entries, field for field
 *
 * The format (RFC 4180): a header row, comma separators, "\n" line ends; a field holding a comma,
 * a quote or a line end is quoted, quotes doubled. Numbers: integers as integers, reals with %.17g
 * (they parse back to the same double); a missing figure (not measured, not defined) is the
 * empty field. Every value written is one of results.json's: nothing is computed here.
 */
#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "bench/campaign_int.h"

static const char *jstr(json_t *o, const char *k) {
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

/* ---- Writing ----------------------------------------------------------------------------------- */

static void put_field(rl_buf *b, const char *s) {
    if (!strpbrk(s, ",\"\r\n")) {
        rl__buf_append_str(b, s);
        return;
    }
    rl__buf_append_byte(b, '"');
    for (; *s; s++) {
        if (*s == '"') rl__buf_append_byte(b, '"');
        rl__buf_append_byte(b, (uint8_t)*s);
    }
    rl__buf_append_byte(b, '"');
}

/* A JSON value as a field: strings as they are, integers, reals with %.17g, anything else empty. */
static void put_json(rl_buf *b, json_t *v) {
    if (json_is_string(v)) put_field(b, json_string_value(v));
    else if (json_is_integer(v)) rl__buf_printf(b, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v) && isfinite(json_real_value(v))) rl__buf_printf(b, "%.17g", json_real_value(v));
    else if (json_is_boolean(v)) rl__buf_append_str(b, json_is_true(v) ? "true" : "false");
}

static int write_buf(const char *dir, const char *name, const rl_buf *b, rl__errdetail *err) {
    char path[RL_CAMP_PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (rl__buf_error(b)) {
        rl__errdetail_append(err, "%s: out of memory", path);
        return RL_E_OUT_OF_MEMORY;
    }
    FILE *f = fopen(path, "w");
    int bad = !f || fwrite(b->data, 1, b->len, f) != b->len;
    if (f && fclose(f)) bad = 1;
    if (bad) {
        rl__errdetail_append(err, "cannot write %s", path);
        return RL_E_IO_ERROR;
    }
    return RL_OK;
}

static const char *const sample_fixed[] = {"topology", "case", "arm", "block",   "repeat",
                                           "position", "seq",  "ops", "seconds", NULL};

/* The summary entry of (topology, case, arm, metric) whose arm is the compared one, or NULL. */
static json_t *find_ratio(json_t *r, const char *topo, const char *kase, const char *arm, const char *metric) {
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(r, "summary"), i, s) {
        if (!strcmp(jstr(s, "topology"), topo) && !strcmp(jstr(s, "case"), kase) && !strcmp(jstr(s, "arm"), arm) &&
            !strcmp(jstr(s, "metric"), metric))
            return s;
    }
    return NULL;
}

int rl__camp_csv_write(const char *dir, json_t *r, rl__errdetail *err) {
    rl_buf b;
    size_t i;
    json_t *s;
    int rc;
    rl__buf_init(&b);
    /* samples.csv */
    for (int j = 0; sample_fixed[j]; j++) rl__buf_printf(&b, "%s%s", j ? "," : "", sample_fixed[j]);
    for (int m = 0; m < RL_CAMP_METRICS; m++) rl__buf_printf(&b, ",%s", rl__camp_metric_name((rl__camp_metric)m));
    rl__buf_append_str(&b, ",rows_hash,last_rows\n");
    json_array_foreach(json_object_get(r, "samples"), i, s) {
        for (int j = 0; sample_fixed[j]; j++) {
            if (j) rl__buf_append_byte(&b, ',');
            put_json(&b, json_object_get(s, sample_fixed[j]));
        }
        for (int m = 0; m < RL_CAMP_METRICS; m++) {
            rl__buf_append_byte(&b, ',');
            put_json(&b, json_object_get(s, rl__camp_metric_name((rl__camp_metric)m)));
        }
        rl__buf_append_byte(&b, ',');
        put_json(&b, json_object_get(s, "rows_hash"));
        rl__buf_append_byte(&b, ',');
        put_json(&b, json_object_get(s, "last_rows"));
        rl__buf_append_byte(&b, '\n');
    }
    if ((rc = write_buf(dir, RL_CAMP_SAMPLES_CSV, &b, err))) goto done;
    /* summary.csv */
    rl__buf_reset(&b);
    json_t *level = json_object_get(json_object_get(json_object_get(r, "protocol"), "statistics"), "level");
    rl__buf_append_str(&b, "topology,case,arm,metric,median,min,max,n_blocks,n_samples,comparison,baseline,ratio,"
                           "ci_low,ci_high,level,status\n");
    json_array_foreach(json_object_get(r, "arm_summary"), i, s) {
        const char *topo = jstr(s, "topology"), *kase = jstr(s, "case"), *arm = jstr(s, "arm");
        for (int m = 0; m < RL_CAMP_METRICS; m++) {
            const char *mn = rl__camp_metric_name((rl__camp_metric)m);
            json_t *f = json_object_get(json_object_get(s, "metrics"), mn);
            if (!f) continue;
            put_field(&b, topo), rl__buf_append_byte(&b, ',');
            put_field(&b, kase), rl__buf_append_byte(&b, ',');
            put_field(&b, arm), rl__buf_append_byte(&b, ',');
            put_field(&b, mn);
            static const char *const ff[] = {"median", "min", "max", "n_blocks", "n_samples"};
            for (int j = 0; j < 5; j++) rl__buf_append_byte(&b, ','), put_json(&b, json_object_get(f, ff[j]));
            json_t *x = find_ratio(r, topo, kase, arm, mn);
            static const char *const rf[] = {"comparison", "baseline", "ratio", "ci_low", "ci_high"};
            for (int j = 0; j < 5; j++)
                rl__buf_append_byte(&b, ','), put_json(&b, x ? json_object_get(x, rf[j]) : NULL);
            rl__buf_append_byte(&b, ',');
            put_json(&b, x ? level : NULL);
            rl__buf_append_byte(&b, ',');
            put_json(&b, x ? json_object_get(x, "status") : NULL);
            rl__buf_append_byte(&b, '\n');
        }
    }
    if ((rc = write_buf(dir, RL_CAMP_SUMMARY_CSV, &b, err))) goto done;
    /* throughput.csv */
    static const char *const tf[] = {"topology",
                                     "case",
                                     "arm",
                                     "clients",
                                     "seconds",
                                     "ops",
                                     "queries_per_second",
                                     "p50_ns",
                                     "p99_ns",
                                     "client_cpu_seconds",
                                     "client_cpu_seconds_per_query",
                                     "client_cpu_seconds_lifetime",
                                     "server_cpu_seconds",
                                     "server_cpu_seconds_per_query",
                                     "servers",
                                     "max_late_seconds",
                                     "ok",
                                     NULL};
    rl__buf_reset(&b);
    for (int j = 0; tf[j]; j++) rl__buf_printf(&b, "%s%s", j ? "," : "", tf[j]);
    rl__buf_append_byte(&b, '\n');
    json_array_foreach(json_object_get(r, "throughput"), i, s) {
        for (int j = 0; tf[j]; j++) {
            if (j) rl__buf_append_byte(&b, ',');
            put_json(&b, json_object_get(s, tf[j]));
        }
        rl__buf_append_byte(&b, '\n');
    }
    rc = write_buf(dir, RL_CAMP_THROUGHPUT_CSV, &b, err);
done:
    rl__buf_release(&b);
    return rc;
}

/* ---- Reading ----------------------------------------------------------------------------------- */

int rl__camp_csv_parse(const char *text, size_t len, json_t **out, rl__errdetail *err) {
    json_t *rows = json_array(), *row = json_array();
    rl_buf f;
    size_t i = 0, line = 1;
    int rc = RL_OK;
    rl__buf_init(&f);
    *out = NULL;
    if (!rows || !row) goto oom;
    while (i < len) {
        /* One field. */
        rl__buf_reset(&f);
        if (text[i] == '"') {
            i++;
            for (;;) {
                if (i >= len) {
                    rl__errdetail_append(err, "line %zu: a quoted field is not closed", line);
                    rc = RL_E_CORRUPT_DATA;
                    goto done;
                }
                if (text[i] == '"' && i + 1 < len && text[i + 1] == '"') rl__buf_append_byte(&f, '"'), i += 2;
                else if (text[i] == '"') {
                    i++;
                    break;
                } else {
                    if (text[i] == '\n') line++;
                    rl__buf_append_byte(&f, (uint8_t)text[i++]);
                }
            }
            if (i < len && text[i] != ',' && text[i] != '\n' && text[i] != '\r') {
                rl__errdetail_append(err, "line %zu: text after a quoted field", line);
                rc = RL_E_CORRUPT_DATA;
                goto done;
            }
        } else {
            while (i < len && text[i] != ',' && text[i] != '\n' && text[i] != '\r') {
                if (text[i] == '"') {
                    rl__errdetail_append(err, "line %zu: a quote inside an unquoted field", line);
                    rc = RL_E_CORRUPT_DATA;
                    goto done;
                }
                rl__buf_append_byte(&f, (uint8_t)text[i++]);
            }
        }
        if (rl__buf_error(&f) || json_array_append_new(row, json_stringn((const char *)f.data, f.len))) goto oom;
        if (i < len && text[i] == ',') {
            i++;
            if (i == len && json_array_append_new(row, json_string(""))) goto oom;
            if (i < len) continue;
        }
        if (i < len && text[i] == '\r') i++;
        if (i < len && text[i] == '\n') i++;
        /* The end of a record. */
        json_t *first = json_array_get(rows, 0);
        if (first && json_array_size(first) != json_array_size(row)) {
            rl__errdetail_append(err, "line %zu: %zu fields where the header has %zu", line, json_array_size(row),
                                 json_array_size(first));
            rc = RL_E_CORRUPT_DATA;
            goto done;
        }
        if (json_array_append_new(rows, row)) {
            row = NULL;
            goto oom;
        }
        line++;
        if (!(row = json_array())) goto oom;
    }
    *out = rows;
    rows = NULL;
    goto done;
oom:
    rc = RL_E_OUT_OF_MEMORY;
    rl__errdetail_append(err, "out of memory");
done:
    json_decref(rows);
    json_decref(row);
    rl__buf_release(&f);
    return rc;
}
