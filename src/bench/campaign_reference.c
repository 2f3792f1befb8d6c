/* campaign_reference.c — the figures the two reference reports published, as data: what the
 * campaign's report shows beside its own (rl__camp_reference, campaign.h).
 *
 * Two reports compared USE_REMOTE_FETCH ("remote") with SCAN_AND_FETCH ("ordinary") on
 * FoundationDB's record layer; every figure is the time ratio remote/ordinary (the geometric mean
 * of six paired block ratios, lower is better) with its nominal 95% block-bootstrap interval where
 * one was printed, and the medians of the block medians where printed:
 *
 *   C3  one storage server (a single-process cluster), memory engine, 250 µs one way on each
 *       direction; matched to topologies of kind single. Its cases are named small-all-1000 and
 *       split-all-1000 (all 1,000 rows drained from price_idx; the direction is not stated):
 *       matched to our rows1000-forward cases.
 *   M2  3 server hosts, 9 storage servers, double replication, the ssd engine, a VPC network;
 *       matched to topologies of kind multi. The 1,000-row cases' own ratios are in tables the
 *       text does not reproduce: only their range, 1.226–2.326, is published (in the text), so
 *       those cases carry the range and no ratio.
 *
 * The data (not this comment) names each report: its title and file, and for each figure the line
 * it is on, so a reader can find it. A case the reports give no figure for has no entry: the
 * report says "not published". Changing a figure here changes what every later report prints; the
 * reports themselves do not change.
 */
#include <math.h>
#include <string.h>

#include <jansson.h>

#include "bench/campaign.h"

#define C3_FILE "000_df0452837ce99cb3.txt"
#define M2_FILE "003_98b222c7124c87d0.txt"
#define C3_TITLE "Phase C3: Remote fetch (0.5 ms synthetic RTT)"
#define M2_TITLE "Phase M2: Remote fetch (3-node cluster)"

static const rl__camp_reference refs[] = {
    {"C3", RL_CAMP_SINGLE, "small-rows1000-forward", 0.224, 0.222, 0.226, 0, 0, 24.0, 108.0, 29,
     "small-all-1000: 0.224 [0.222, 0.226] (24.0 ms vs 108.0 ms)"},
    {"C3", RL_CAMP_SINGLE, "split-rows1000-forward", 1.053, 1.008, 1.101, 0, 0, 276.9, 266.4, 30,
     "split-all-1000: 1.053 [1.008, 1.101], 276.9 ms vs 266.4 ms"},
    {"M2", RL_CAMP_MULTI, "skip3-rows10-reverse", 0.158, 0.155, 0.160, 0, 0, 4.87, 31.13, 40,
     "skip3-rows10-reverse (0.158 [0.155, 0.160], 4.87 ms vs 31.13 ms)"},
    {"M2", RL_CAMP_MULTI, "split-rows10-forward", 0.873, NAN, NAN, 0, 0, NAN, NAN, 41, "split-rows10 (0.873 forward"},
    {"M2", RL_CAMP_MULTI, "split-rows10-reverse", 0.854, NAN, NAN, 0, 0, NAN, NAN, 41, "0.854 reverse"},
    {"M2", RL_CAMP_MULTI, "small-limit1-forward", 0.979, NAN, NAN, 0, 0, NAN, NAN, 41, "small-limit1 (0.979 forward)"},
    {"M2", RL_CAMP_MULTI, "small-rows1000-forward", NAN, NAN, NAN, 1.226, 2.326, NAN, NAN, 43,
     "regressed 1,000-row scans in the measured configurations (1.226–2.326×)"},
    {"M2", RL_CAMP_MULTI, "small-rows1000-reverse", NAN, NAN, NAN, 1.226, 2.326, NAN, NAN, 43,
     "regressed 1,000-row scans in the measured configurations (1.226–2.326×)"},
    {"M2", RL_CAMP_MULTI, "split-rows1000-forward", NAN, NAN, NAN, 1.226, 2.326, NAN, NAN, 43,
     "regressed 1,000-row scans in the measured configurations (1.226–2.326×)"},
    {"M2", RL_CAMP_MULTI, "split-rows1000-reverse", NAN, NAN, NAN, 1.226, 2.326, NAN, NAN, 43,
     "regressed 1,000-row scans in the measured configurations (1.226–2.326×)"},
    {"M2", RL_CAMP_MULTI, "skip3-rows1000-forward", NAN, NAN, NAN, 1.226, 2.326, NAN, NAN, 43,
     "regressed 1,000-row scans in the measured configurations (1.226–2.326×)"},
    {"M2", RL_CAMP_MULTI, "skip3-rows1000-reverse", NAN, NAN, NAN, 1.226, 2.326, NAN, NAN, 43,
     "regressed 1,000-row scans in the measured configurations (1.226–2.326×)"},
};

/* The RTT the C3 report measured before its phase (unloaded ping through the injected delay). */
#define C3_PING_LINE 9

const rl__camp_reference *rl__camp_reference_find(rl__camp_topo_kind kind, const char *kase) {
    for (size_t i = 0; i < sizeof refs / sizeof refs[0]; i++)
        if (refs[i].kind == kind && !strcmp(refs[i].case_name, kase)) return &refs[i];
    return NULL;
}

const char *rl__camp_reference_report(rl__camp_topo_kind kind) {
    return kind == RL_CAMP_SINGLE ? "C3" : kind == RL_CAMP_MULTI ? "M2" : NULL;
}

static json_t *num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

json_t *rl__camp_reference_json(void) {
    json_t *reports =
        json_pack("[{s:s, s:s, s:s, s:s, s:s}, {s:s, s:s, s:s, s:s, s:s}]", "report", "C3", "title", C3_TITLE, "file",
                  C3_FILE, "topology_kind", "single", "setup",
                  "one storage server (single process), memory engine, 250 us one way per direction (netem)", "report",
                  "M2", "title", M2_TITLE, "file", M2_FILE, "topology_kind", "multi", "setup",
                  "3 server hosts, 9 storage servers, double replication, ssd-2 engine, VPC network");
    json_t *figs = json_array();
    for (size_t i = 0; i < sizeof refs / sizeof refs[0]; i++) {
        const rl__camp_reference *r = &refs[i];
        json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:s}", "report", r->report, "file",
                              strcmp(r->report, "C3") ? M2_FILE : C3_FILE, "topology_kind",
                              r->kind == RL_CAMP_SINGLE ? "single" : "multi", "case", r->case_name, "metric",
                              "ns_per_op", "line", r->line, "quote", r->quote);
        json_object_set_new(o, "ratio", num(r->ratio));
        json_object_set_new(o, "ci_low", num(r->ci_low));
        json_object_set_new(o, "ci_high", num(r->ci_high));
        json_object_set_new(o, "range_low", r->range_low > 0 ? json_real(r->range_low) : json_null());
        json_object_set_new(o, "range_high", r->range_high > 0 ? json_real(r->range_high) : json_null());
        json_object_set_new(o, "remote_ms", num(r->remote_ms));
        json_object_set_new(o, "ordinary_ms", num(r->ordinary_ms));
        json_array_append_new(figs, o);
    }
    json_t *rtt =
        json_pack("{s:s, s:s, s:s, s:f, s:f, s:f, s:f, s:i, s:s}", "report", "C3", "file", C3_FILE, "topology_kind",
                  "single", "p50_ms", 0.597, "p99_ms", 0.628, "min_ms", 0.534, "max_ms", 0.629, "line", C3_PING_LINE,
                  "quote", "100-packet unloaded ping ... p50 0.597 ms, p99 0.628 ms (min 0.534 ms, max 0.629 ms)");
    return json_pack("{s:o, s:o, s:o}", "reports", reports, "figures", figs, "rtt", rtt);
}
