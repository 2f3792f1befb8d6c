/* campaign_worker.c — the campaign's worker process (`rlbench campaign-worker`, campaign.h): one
 * (block, case, arm) of the design, in a fresh process so that no arm inherits another's caches,
 * allocator state or page faults.
 *
 * It opens the case's database read-only (and the SQLite peer for the sqlite arm), runs the op
 * untimed for warmup_seconds (at least once), then `repeats` timed loops of `seconds` each (at
 * least one op each), and prints one JSON line per repeat with the per-op figures (campaign.h's
 * metrics) and the hash of the last op's rows, then {"done": true, ...}. Allocations are the
 * calling thread's rl_alloc counters over the loop (SQLite's through its counting wrapper).
 *
 * The throughput mode (o->throughput_seconds > 0; the runner starts several at once) replaces the
 * repeats with one closed-loop window that starts at a wall-clock time shared by every client of
 * the level: each op's latency into a log-linear histogram (stats.h), the ops, the window's own
 * length, how late it began, and this process's CPU over the window (/proc/self/stat).
 */
#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "bench/campaign_int.h"
#include "bench/campaign_proc.h"
#include "bench/stats.h"

static void print_line(FILE *out, json_t *o) {
    char *s = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(17));
    if (s) fprintf(out, "%s\n", s);
    free(s);
    json_decref(o);
    fflush(out);
}

static void print_error(FILE *out, int rc, const rl__errdetail *err) {
    print_line(out, json_pack("{s:s, s:s}", "error", rl_error_name(rc), "message",
                              rl__errdetail_len(err) ? rl__errdetail_get(err) : rl_error_message(rc)));
}

/* The throughput mode: wait for the window's start (the wall clock, so every client of a level
 * starts together), then the closed loop, every op timed into the histogram; one line. */
static int throughput_window(const rl__camp_worker_options *o, rl__camp_conn *c, const rl__camp_case *k, FILE *out,
                             rl__errdetail *err) {
    uint64_t *hist = calloc(RL_STATS_HIST_BUCKETS, sizeof *hist);
    rl__camp_sums s;
    int rc = RL_OK;
    if (!hist) return RL_E_OUT_OF_MEMORY;
    memset(&s, 0, sizeof s);
    uint64_t now_us = rl__clock_wall_us();
    if (o->start_at_us > now_us) rl__clock_sleep_us(o->start_at_us - now_us);
    double late = o->start_at_us ? ((double)rl__clock_wall_us() - (double)o->start_at_us) / 1e6 : 0;
    double cpu0 = rl__camp_proc_cpu_seconds(0);
    uint64_t t0 = rl__clock_mono_ns(), budget = (uint64_t)(o->throughput_seconds * 1e9), t1 = t0, prev = t0;
    do {
        if ((rc = rl__camp_op(c, k, o->arm, o->pipeline_depth, &s, err))) break;
        t1 = rl__clock_mono_ns();
        hist[rl__stats_hist_index(t1 - prev)]++;
        prev = t1;
    } while (t1 - t0 < budget);
    double cpu1 = rl__camp_proc_cpu_seconds(0);
    if (!rc) {
        char hash[17];
        snprintf(hash, sizeof hash, "%016llx", (unsigned long long)s.hash);
        json_t *h = json_array();
        for (int i = 0; i < RL_STATS_HIST_BUCKETS; i++)
            if (hist[i]) json_array_append_new(h, json_pack("[i, I]", i, (json_int_t)hist[i]));
        json_t *line = json_pack("{s:b, s:I, s:f, s:f, s:s, s:I, s:o}", "throughput", 1, "ops", (json_int_t)s.ops,
                                 "seconds", (double)(t1 - t0) / 1e9, "late_seconds", late, "rows_hash", hash,
                                 "last_rows", (json_int_t)s.last_rows, "hist", h);
        json_object_set_new(line, "cpu_seconds", isnan(cpu0) || isnan(cpu1) ? json_null() : json_real(cpu1 - cpu0));
        print_line(out, line);
    }
    free(hist);
    return rc;
}

int rl__camp_worker(const rl__camp_worker_options *o, FILE *out) {
    rl__camp_case k;
    rl__camp_conn c;
    rl__errdetail err;
    int rc;
    memset(&c, 0, sizeof c);
    rl__errdetail_init(&err, NULL);
    if ((rc = rl__camp_case_parse(o->case_name, &k, &err))) goto fail;
    if (o->arm == RL_CAMP_SQLITE && !o->sqlite) {
        rl__errdetail_append(&err, "the sqlite arm needs --sqlite FILE");
        rc = RL_E_INVALID_ARGUMENT;
        goto fail;
    }
    int counting = o->arm == RL_CAMP_SQLITE ? rl__camp_sqlite_count_install() : 1;
    uint64_t t_open = rl__clock_mono_ns();
    if ((rc = rl__camp_conn_open(&c, o->url, o->store, o->arm == RL_CAMP_SQLITE ? o->sqlite : NULL, &err))) goto fail;
    double open_s = (double)(rl__clock_mono_ns() - t_open) / 1e9;
    /* Warm-up: at least one op, untimed. */
    rl__camp_sums w;
    memset(&w, 0, sizeof w);
    uint64_t t0 = rl__clock_mono_ns(), budget = (uint64_t)(o->warmup_seconds * 1e9);
    do {
        if ((rc = rl__camp_op(&c, &k, o->arm, o->pipeline_depth, &w, &err))) goto fail;
    } while (rl__clock_mono_ns() - t0 < budget);
    if (o->throughput_seconds > 0) {
        rc = throughput_window(o, &c, &k, out, &err);
        if (rc) goto fail;
        print_line(out,
                   json_pack("{s:b, s:f, s:I}", "done", 1, "open_seconds", open_s, "warmup_ops", (json_int_t)w.ops));
        rl__camp_conn_close(&c);
        return RL_OK;
    }
    budget = (uint64_t)(o->seconds * 1e9);
    for (int r = 0; r < o->repeats; r++) {
        rl__camp_sums s;
        rl_alloc_stats a0, a1;
        uint64_t sa0, sb0, sa1, sb1, t1 = 0;
        memset(&s, 0, sizeof s);
        rl__camp_sqlite_counts(&sa0, &sb0);
        rl_alloc_get_stats(&a0);
        t0 = rl__clock_mono_ns();
        do {
            if ((rc = rl__camp_op(&c, &k, o->arm, o->pipeline_depth, &s, &err))) goto fail;
            t1 = rl__clock_mono_ns();
        } while (t1 - t0 < budget);
        rl_alloc_get_stats(&a1);
        rl__camp_sqlite_counts(&sa1, &sb1);
        double ops = (double)s.ops, v[RL_CAMP_METRICS];
        v[RL_CAMP_M_NS] = (double)(t1 - t0) / ops;
        if (o->arm == RL_CAMP_SQLITE) {
            v[RL_CAMP_M_BYTES] = counting ? (double)(sb1 - sb0) / ops : NAN;
            v[RL_CAMP_M_ALLOCS] = counting ? (double)(sa1 - sa0) / ops : NAN;
        } else {
            v[RL_CAMP_M_BYTES] = (double)(a1.bytes - a0.bytes) / ops;
            v[RL_CAMP_M_ALLOCS] = (double)(a1.allocs - a0.allocs) / ops;
        }
        v[RL_CAMP_M_ROWS] = (double)s.rows / ops;
        v[RL_CAMP_M_REQUESTS] = s.net_uncounted ? NAN : (double)s.requests / ops;
        v[RL_CAMP_M_ROUND_TRIPS] = s.net_uncounted ? NAN : (double)s.round_trips / ops;
        v[RL_CAMP_M_KV_BYTES] = (double)s.kv_bytes / ops;
        v[RL_CAMP_M_INDEX_ENTRIES] = (double)s.index_entries / ops;
        v[RL_CAMP_M_CLIENT_READS] = (double)s.client_reads / ops;
        v[RL_CAMP_M_MAPPED_REQUESTS] = (double)s.mapped_requests / ops;
        v[RL_CAMP_M_RECORD_LOADS] = (double)s.record_loads / ops;
        v[RL_CAMP_M_NET_BYTES] = s.net_uncounted ? NAN : (double)s.net_bytes_received / ops;
        char hash[17];
        snprintf(hash, sizeof hash, "%016llx", (unsigned long long)s.hash);
        json_t *line =
            json_pack("{s:i, s:I, s:f}", "repeat", r + 1, "ops", (json_int_t)s.ops, "seconds", (double)(t1 - t0) / 1e9);
        for (int m = 0; m < RL_CAMP_METRICS; m++)
            json_object_set_new(line, rl__camp_metric_name((rl__camp_metric)m),
                                isnan(v[m]) ? json_null() : json_real(v[m]));
        json_object_set_new(line, "rows_hash", json_string(hash));
        json_object_set_new(line, "last_rows", json_integer((json_int_t)s.last_rows));
        print_line(out, line);
    }
    print_line(out, json_pack("{s:b, s:f, s:I}", "done", 1, "open_seconds", open_s, "warmup_ops", (json_int_t)w.ops));
    rl__camp_conn_close(&c);
    return RL_OK;
fail:
    print_error(out, rc, &err);
    rl__camp_conn_close(&c);
    return rc;
}
