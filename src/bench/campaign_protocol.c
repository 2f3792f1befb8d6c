/* campaign_protocol.c — the campaign's protocol (campaign.h): names of arms, metrics, variants and
 * cases; the order of arms per block; the built-in protocols; the strict JSON parser and the
 * canonical printer. The built-in protocols by name: full, quick, c3, m2 (rl__camp_protocol_named).
 *
 * The protocol file (every field optional; a missing one takes the full protocol's value; an
 * unknown one is an error, so a misspelt field never silently falls back to a default):
 *
 *   {
 *     "name": "full", "description": "...",
 *     "dataset": {"records": 1000, "seed": 42, "split_padding": 100000},
 *     "topologies": [
 *       {"name": "embedded", "kind": "embedded", "delay_us": 0},
 *       {"name": "single", "kind": "single", "delay_us": 250, "jitter_us": 0,
 *        "storage_servers": 1, "hosts": 1, "replication": 1, "placement": "colocated" (or "disjoint",
 *        or "reports": multi only, see campaign_topology.c),
 *        "secondary_reads": "individual", "engine": "memory"}, ...,
 *       {"name": "fdb", "kind": "fdb", "url": "fdb:/etc/foundationdb/fdb.cluster"}],
 *     "cases": ["small-limit1-forward", ...],
 *     "arms": ["ordinary", "remote", "adaptive", "sqlite"],
 *     "design": {"blocks": 6, "repeats": 3, "seconds": 3, "warmup_seconds": 0.5,
 *                "pipeline_depth": 10, "process_timeout_seconds": 0},
 *     "statistics": {"resamples": 20000, "seed": 492817, "level": 0.95},
 *     "checks": {"contamination_threshold": 0.05, "rtt_pings": 100},
 *     "keep_data": false,
 *     "throughput": {"clients": [1, 4, 16], "seconds": 10, "warmup_seconds": 1,
 *                    "cases": ["small-rows10-forward"]}
 *   }
 *
 * "throughput" is the one field whose absence does not take the full protocol's value: a protocol
 * without it runs no throughput phase (so protocol files written before the phase existed still
 * declare exactly the run they declared). "clients": [] is no phase too.
 *
 * The printer writes exactly this layout, doubles with %.15g (protocol values are typed by people;
 * 15 significant digits print them as typed and parse back to the same double).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "bench/campaign.h"
#include "reclayer/error.h"

/* ---- Names ------------------------------------------------------------------------------------ */

static const char *const arm_names[RL_CAMP_ARM_KINDS] = {"ordinary", "remote", "remote-grouped", "adaptive", "sqlite"};
static const char *const comparison_names[RL_CAMP_COMPARISONS] = {"remote/ordinary", "remote-grouped/ordinary",
                                                                  "adaptive/best", "sqlite/ordinary"};
static const char *const metric_names[RL_CAMP_METRICS] = {
    "ns_per_op",           "bytes_per_op",           "allocs_per_op",       "rows_per_op",
    "requests_per_op",     "round_trips_per_op",     "kv_bytes_per_op",     "index_entries_per_op",
    "client_reads_per_op", "mapped_requests_per_op", "record_loads_per_op", "net_bytes_received_per_op"};
static const char *const variant_names[RL_CAMP_VARIANTS] = {"small", "split"};
static const char *const kind_names[] = {"embedded", "single", "multi", "fdb"};

const char *rl__camp_arm_name(rl__camp_arm a) { return (unsigned)a < RL_CAMP_ARM_KINDS ? arm_names[a] : "unknown"; }
const char *rl__camp_metric_name(rl__camp_metric m) {
    return (unsigned)m < RL_CAMP_METRICS ? metric_names[m] : "unknown";
}
const char *rl__camp_variant_name(rl__camp_variant v) {
    return (unsigned)v < RL_CAMP_VARIANTS ? variant_names[v] : "unknown";
}

const char *rl__camp_comparison_name(int i) {
    return (unsigned)i < RL_CAMP_COMPARISONS ? comparison_names[i] : "unknown";
}

int rl__camp_arm_applies(rl__camp_arm a, int kind, const char **why) {
    const char *w = NULL;
    if (a == RL_CAMP_SQLITE && kind != RL_CAMP_EMBEDDED) w = "the SQLite peer runs on embedded topologies only";
    if (a == RL_CAMP_REMOTE_GROUPED && kind != RL_CAMP_MULTI)
        w = "remote-grouped runs on multi topologies only (elsewhere no secondary leaves its server)";
    if (why) *why = w;
    return !w;
}

int rl__camp_arm_of(const char *name) {
    for (int i = 0; i < RL_CAMP_ARM_KINDS; i++)
        if (!strcmp(name, arm_names[i])) return i;
    return -1;
}

int rl__camp_metric_of(const char *name) {
    for (int i = 0; i < RL_CAMP_METRICS; i++)
        if (!strcmp(name, metric_names[i])) return i;
    return -1;
}

int rl__camp_case_parse(const char *name, rl__camp_case *c, rl__errdetail *err) {
    char v[16], r[16], d[16];
    const char *p1 = strchr(name, '-'), *p2 = p1 ? strchr(p1 + 1, '-') : NULL;
    memset(c, 0, sizeof *c);
    if (strlen(name) >= sizeof c->name || !p1 || !p2 || strchr(p2 + 1, '-') || p1 - name >= (long)sizeof v ||
        p2 - p1 - 1 >= (long)sizeof r || strlen(p2 + 1) >= sizeof d) {
        rl__errdetail_append(err, "'%.64s' is not VARIANT-ROWS-DIRECTION (e.g. small-rows10-reverse)", name);
        return RL_E_INVALID_ARGUMENT;
    }
    memcpy(v, name, (size_t)(p1 - name)), v[p1 - name] = 0;
    memcpy(r, p1 + 1, (size_t)(p2 - p1 - 1)), r[p2 - p1 - 1] = 0;
    strcpy(d, p2 + 1);
    strcpy(c->name, name);
    if (!strcmp(v, "small")) c->variant = RL_CAMP_SMALL;
    else if (!strcmp(v, "split")) c->variant = RL_CAMP_SPLIT;
    else if (!strcmp(v, "skip3")) c->variant = RL_CAMP_SMALL, c->skip = 3;
    else {
        rl__errdetail_append(err, "'%s': VARIANT must be small, split or skip3", name);
        return RL_E_INVALID_ARGUMENT;
    }
    if (!strcmp(r, "limit1")) c->limit = 1;
    else if (!strcmp(r, "rows10")) c->limit = 10;
    else if (!strcmp(r, "rows1000")) c->limit = 1000;
    else {
        rl__errdetail_append(err, "'%s': ROWS must be limit1, rows10 or rows1000", name);
        return RL_E_INVALID_ARGUMENT;
    }
    if (!strcmp(d, "forward")) c->reverse = 0;
    else if (!strcmp(d, "reverse")) c->reverse = 1;
    else {
        rl__errdetail_append(err, "'%s': DIRECTION must be forward or reverse", name);
        return RL_E_INVALID_ARGUMENT;
    }
    return RL_OK;
}

void rl__camp_arm_order(int block, const rl__camp_arm *arms, int n, rl__camp_arm *out) {
    for (int i = 0; i < n; i++) out[i] = block % 2 ? arms[n - 1 - i] : arms[i];
}

double rl__camp_process_timeout(const rl__camp_protocol *p) {
    if (p->process_timeout_seconds > 0) return p->process_timeout_seconds;
    return 60 + 3 * (p->warmup_seconds + p->repeats * p->seconds);
}

/* ---- Built-in protocols ------------------------------------------------------------------------ */

static void set_topology(rl__camp_topology *t, const char *name, rl__camp_topo_kind kind, int delay_us) {
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->kind = kind;
    t->delay_us = delay_us;
    if (kind == RL_CAMP_EMBEDDED || kind == RL_CAMP_FDB) return; /* fdb: its url is the parser's */
    strcpy(t->secondary, "individual");
    strcpy(t->engine, "memory");
    if (kind == RL_CAMP_SINGLE) {
        t->storage_servers = 1, t->hosts = 1, t->replication = 1;
        strcpy(t->placement, "colocated");
    } else {
        t->storage_servers = 6, t->hosts = 3, t->replication = 2;
        strcpy(t->placement, "disjoint");
    }
}

static const char *const all_cases[16] = {
    "small-limit1-forward",   "small-limit1-reverse",   "small-rows10-forward",   "small-rows10-reverse",
    "small-rows1000-forward", "small-rows1000-reverse", "split-limit1-forward",   "split-limit1-reverse",
    "split-rows10-forward",   "split-rows10-reverse",   "split-rows1000-forward", "split-rows1000-reverse",
    "skip3-rows10-forward",   "skip3-rows10-reverse",   "skip3-rows1000-forward", "skip3-rows1000-reverse"};

/* The reference reports' design, shared by c3 and m2: 1,000 Orders per variant, 6 blocks x 3
 * repeats of 3 s, 20,000 resamples at 95%, the reports' two arms plus ADAPTIVE. */
static void reports_design(rl__camp_protocol *p, const char *name, uint64_t bootstrap_seed) {
    rl__camp_protocol_builtin(0, p);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->n_topologies = 0;
    p->n_cases = 0;
    p->n_arms = 0;
    p->arms[p->n_arms++] = RL_CAMP_ORDINARY;
    p->arms[p->n_arms++] = RL_CAMP_REMOTE;
    p->arms[p->n_arms++] = RL_CAMP_ADAPTIVE;
    p->bootstrap_seed = bootstrap_seed;
}

int rl__camp_protocol_named(const char *name, rl__camp_protocol *p) {
    if (!strcmp(name, "full") || !strcmp(name, "quick")) {
        rl__camp_protocol_builtin(!strcmp(name, "quick"), p);
        return RL_OK;
    }
    if (!strcmp(name, "c3")) {
        /* C3: one storage server (a single-process cluster), memory engine, 250 us one way; its two
         * full scans, small-all-1000 and split-all-1000, are our rows1000 cases (forward). */
        reports_design(p, "c3", 391706);
        snprintf(p->description, sizeof p->description, "%s",
                 "The C3 reference report's design: one storage server, memory engine, 250 us one way, "
                 "small-rows1000 and split-rows1000, 6 blocks x 3 repeats of 3 s; arms ordinary, remote, adaptive.");
        set_topology(&p->topologies[p->n_topologies++], "c3", RL_CAMP_SINGLE, 250);
        rl__camp_case_parse("small-rows1000-forward", &p->cases[p->n_cases++], NULL);
        rl__camp_case_parse("split-rows1000-forward", &p->cases[p->n_cases++], NULL);
        p->n_tp_cases = 0; /* the throughput phase on the report's small full scan */
        rl__camp_case_parse("small-rows1000-forward", &p->tp_cases[p->n_tp_cases++], NULL);
        return RL_OK;
    }
    if (!strcmp(name, "m2")) {
        /* M2: 3 hosts x 3 storage servers, double replication, ssd engine, 250 us one way, the 16
         * cases, the reports' placement (placement "reports", campaign_topology.c). */
        reports_design(p, "m2", 492817);
        snprintf(p->description, sizeof p->description, "%s",
                 "The M2 reference report's design: 3 hosts x 3 storage servers, double replication, ssd engine, "
                 "250 us one way, the reports' placement, the 16 cases, 6 blocks x 3 repeats of 3 s; arms "
                 "ordinary, remote (individual), remote-grouped, adaptive.");
        rl__camp_topology *t = &p->topologies[p->n_topologies++];
        set_topology(t, "m2", RL_CAMP_MULTI, 250); /* secondary reads individual: FoundationDB's */
        /* remote-grouped beside remote: reclayer's grouped secondaries against FoundationDB's */
        p->arms[2] = RL_CAMP_REMOTE_GROUPED, p->arms[3] = RL_CAMP_ADAPTIVE, p->n_arms = 4;
        t->storage_servers = 9, t->hosts = 3, t->replication = 2;
        strcpy(t->placement, "reports");
        strcpy(t->engine, "ssd");
        for (int i = 0; i < 16; i++) rl__camp_case_parse(all_cases[i], &p->cases[p->n_cases++], NULL);
        return RL_OK;
    }
    return RL_E_INVALID_ARGUMENT;
}

void rl__camp_protocol_builtin(int quick, rl__camp_protocol *p) {
    const char *const *cases = all_cases;
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", quick ? "quick" : "full");
    snprintf(p->description, sizeof p->description, "%s",
             quick ? "The quick campaign: the reports' 16 cases on embedded and single (250 us one way), 3 blocks x 3 "
                     "repeats of 0.1 s; throughput with 1 and 2 clients for 1 s."
                   : "The full campaign of the reference reports: 16 cases, 6 blocks x 3 repeats of 3 s, on the "
                     "embedded, single and multi topologies; throughput with 1, 4 and 16 clients for 10 s.");
    p->records = 1000;
    p->data_seed = 42;
    p->split_padding = 100000;
    set_topology(&p->topologies[p->n_topologies++], "embedded", RL_CAMP_EMBEDDED, 0);
    /* quick includes single at 250 us: measured 1m17s beside embedded's 1m50s (docs/benchmarks.md) */
    set_topology(&p->topologies[p->n_topologies++], "single", RL_CAMP_SINGLE, 250);
    if (!quick) set_topology(&p->topologies[p->n_topologies++], "multi", RL_CAMP_MULTI, 250);
    for (int i = 0; i < 16; i++) rl__camp_case_parse(cases[i], &p->cases[p->n_cases++], NULL);
    for (int a = 0; a < RL_CAMP_ARM_KINDS; a++) p->arms[p->n_arms++] = (rl__camp_arm)a;
    /* quick: 3 blocks since the adaptive arm is available (4 arms on embedded, 3 on single: 336
     * processes, about the 320 of 4 blocks without it, measured at 3 m 09 s) */
    p->blocks = quick ? 3 : 6;
    p->repeats = 3;
    p->seconds = quick ? 0.1 : 3;
    p->warmup_seconds = quick ? 0.05 : 0.5;
    p->pipeline_depth = 10;
    p->resamples = quick ? 2000 : 20000;
    p->bootstrap_seed = 492817;
    p->level = 0.95;
    p->contamination_threshold = 0.05;
    p->rtt_pings = 100;
    p->process_timeout_seconds = 0;
    p->keep_data = 0;
    /* the throughput phase: 1, 4 and 16 clients for 10 s (quick: 1 and 2 for 1 s) */
    p->n_tp_clients = 0;
    if (quick) p->tp_clients[p->n_tp_clients++] = 1, p->tp_clients[p->n_tp_clients++] = 2;
    else
        p->tp_clients[p->n_tp_clients++] = 1, p->tp_clients[p->n_tp_clients++] = 4,
        p->tp_clients[p->n_tp_clients++] = 16;
    p->n_tp_cases = 0;
    rl__camp_case_parse("small-rows10-forward", &p->tp_cases[p->n_tp_cases++], NULL);
    p->tp_seconds = quick ? 1 : 10;
    p->tp_warmup_seconds = quick ? 0.1 : 1;
}

/* ---- Parsing ----------------------------------------------------------------------------------- */

/* Refuse any key of obj not in the NULL-terminated list allowed. */
static int check_keys(json_t *obj, const char *path, const char *const *allowed, rl__errdetail *err) {
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        int ok = 0;
        for (int i = 0; allowed[i]; i++) ok |= !strcmp(key, allowed[i]);
        if (!ok) {
            rl__errdetail_append(err, "unknown field '%s%s%.64s'", path, *path ? "." : "", key);
            return RL_E_INVALID_ARGUMENT;
        }
    }
    return RL_OK;
}

static int need_object(json_t *v, const char *path, rl__errdetail *err) {
    if (json_is_object(v)) return RL_OK;
    rl__errdetail_append(err, "%s: must be an object", path);
    return RL_E_INVALID_ARGUMENT;
}

/* An integer field key of obj in [min, max] into *out (left alone when absent). */
static int get_int64(json_t *obj, const char *path, const char *key, int64_t min, int64_t max, int64_t *out,
                     rl__errdetail *err) {
    json_t *v = json_object_get(obj, key);
    if (!v) return RL_OK;
    if (!json_is_integer(v)) {
        rl__errdetail_append(err, "%s%s%s: must be an integer", path, *path ? "." : "", key);
        return RL_E_INVALID_ARGUMENT;
    }
    int64_t x = (int64_t)json_integer_value(v);
    if (x < min || x > max) {
        rl__errdetail_append(err, "%s%s%s: %lld is out of range [%lld, %lld]", path, *path ? "." : "", key,
                             (long long)x, (long long)min, (long long)max);
        return RL_E_INVALID_ARGUMENT;
    }
    *out = x;
    return RL_OK;
}

static int get_int(json_t *obj, const char *path, const char *key, int min, int max, int *out, rl__errdetail *err) {
    int64_t x = *out;
    int rc = get_int64(obj, path, key, min, max, &x, err);
    if (!rc) *out = (int)x;
    return rc;
}

static int get_u64(json_t *obj, const char *path, const char *key, uint64_t *out, rl__errdetail *err) {
    int64_t x = (int64_t)*out;
    int rc = get_int64(obj, path, key, 0, INT64_MAX, &x, err);
    if (!rc) *out = (uint64_t)x;
    return rc;
}

/* A number field in [min, max] (open at either end when the matching flag is set). */
static int get_double(json_t *obj, const char *path, const char *key, double min, double max, int open_lo, int open_hi,
                      double *out, rl__errdetail *err) {
    json_t *v = json_object_get(obj, key);
    if (!v) return RL_OK;
    if (!json_is_number(v)) {
        rl__errdetail_append(err, "%s%s%s: must be a number", path, *path ? "." : "", key);
        return RL_E_INVALID_ARGUMENT;
    }
    double x = json_number_value(v);
    if (!isfinite(x) || (open_lo ? x <= min : x < min) || (open_hi ? x >= max : x > max)) {
        rl__errdetail_append(err, "%s%s%s: %g is out of range %c%g, %g%c", path, *path ? "." : "", key, x,
                             open_lo ? '(' : '[', min, max, open_hi ? ')' : ']');
        return RL_E_INVALID_ARGUMENT;
    }
    *out = x;
    return RL_OK;
}

/* A string field that must be one of choices (NULL-terminated), copied into out (cap bytes). */
static int get_choice(json_t *obj, const char *path, const char *key, const char *const *choices, char *out, size_t cap,
                      rl__errdetail *err) {
    json_t *v = json_object_get(obj, key);
    if (!v) return RL_OK;
    if (json_is_string(v))
        for (int i = 0; choices[i]; i++)
            if (!strcmp(json_string_value(v), choices[i])) {
                snprintf(out, cap, "%s", choices[i]);
                return RL_OK;
            }
    rl__errdetail_append(err, "%s%s%s: ", path, *path ? "." : "", key);
    if (json_is_string(v)) rl__errdetail_append(err, "'%.64s' is not one of ", json_string_value(v));
    else rl__errdetail_append(err, "must be one of ");
    for (int i = 0; choices[i]; i++) rl__errdetail_append(err, "%s%s", i ? ", " : "", choices[i]);
    return RL_E_INVALID_ARGUMENT;
}

static int get_string(json_t *obj, const char *path, const char *key, char *out, size_t cap, rl__errdetail *err) {
    json_t *v = json_object_get(obj, key);
    if (!v) return RL_OK;
    if (!json_is_string(v) || json_string_length(v) >= cap || json_string_length(v) == 0 ||
        strlen(json_string_value(v)) != json_string_length(v)) {
        rl__errdetail_append(err, "%s%s%s: must be a non-empty string of at most %zu bytes", path, *path ? "." : "",
                             key, cap - 1);
        return RL_E_INVALID_ARGUMENT;
    }
    snprintf(out, cap, "%s", json_string_value(v));
    return RL_OK;
}

static int parse_topology(json_t *o, int i, rl__camp_topology *t, rl__errdetail *err) {
    static const char *const keys[] = {"name",  "kind",        "delay_us",  "jitter_us",       "storage_servers",
                                       "hosts", "replication", "placement", "secondary_reads", "engine",
                                       "url",   NULL};
    static const char *const kinds[] = {"embedded", "single", "multi", "fdb", NULL};
    static const char *const placements[] = {"colocated", "disjoint", "reports", NULL};
    static const char *const secondaries[] = {"individual", "grouped", NULL};
    static const char *const engines[] = {"memory", "ssd", NULL};
    char path[64], kind[16] = "";
    int rc;
    snprintf(path, sizeof path, "topologies[%d]", i);
    if ((rc = need_object(o, path, err)) || (rc = check_keys(o, path, keys, err))) return rc;
    if (!json_object_get(o, "kind") || !json_object_get(o, "name")) {
        rl__errdetail_append(err, "%s: needs a name and a kind", path);
        return RL_E_INVALID_ARGUMENT;
    }
    if ((rc = get_choice(o, path, "kind", kinds, kind, sizeof kind, err))) return rc;
    rl__camp_topo_kind k = !strcmp(kind, "embedded") ? RL_CAMP_EMBEDDED
                           : !strcmp(kind, "single") ? RL_CAMP_SINGLE
                           : !strcmp(kind, "multi")  ? RL_CAMP_MULTI
                                                     : RL_CAMP_FDB;
    set_topology(t, "x", k, k == RL_CAMP_EMBEDDED || k == RL_CAMP_FDB ? 0 : 250);
    if ((rc = get_string(o, path, "name", t->name, sizeof t->name, err))) return rc;
    if ((rc = get_int(o, path, "delay_us", 0, 1000000, &t->delay_us, err))) return rc;
    if (k != RL_CAMP_FDB && json_object_get(o, "url")) {
        rl__errdetail_append(err, "%s.url: only for fdb topologies (the others start their own database)", path);
        return RL_E_INVALID_ARGUMENT;
    }
    if (k == RL_CAMP_EMBEDDED || k == RL_CAMP_FDB) {
        for (int j = 3; strcmp(keys[j], "url"); j++)
            if (json_object_get(o, keys[j])) {
                rl__errdetail_append(err, "%s.%s: only for single and multi topologies", path, keys[j]);
                return RL_E_INVALID_ARGUMENT;
            }
        if (t->delay_us) {
            rl__errdetail_append(err, "%s.delay_us: %s (must be 0)", path,
                                 k == RL_CAMP_FDB ? "the campaign injects no delay into a database it did not start"
                                                  : "an embedded topology has no network");
            return RL_E_INVALID_ARGUMENT;
        }
        if (k == RL_CAMP_EMBEDDED) return RL_OK;
        /* fdb: the database to run against, an fdb: URL (FoundationDB's cluster file). */
        if (!json_object_get(o, "url")) {
            rl__errdetail_append(err, "%s: an fdb topology needs a url (fdb:PATH/fdb.cluster)", path);
            return RL_E_INVALID_ARGUMENT;
        }
        if ((rc = get_string(o, path, "url", t->url, sizeof t->url, err))) return rc;
        if (strncmp(t->url, "fdb:", 4)) {
            rl__errdetail_append(err, "%s.url: '%.64s' is not an fdb: URL (fdb:PATH/fdb.cluster)", path, t->url);
            return RL_E_INVALID_ARGUMENT;
        }
        return RL_OK;
    }
    if ((rc = get_int(o, path, "jitter_us", 0, t->delay_us, &t->jitter_us, err)) ||
        (rc = get_int(o, path, "storage_servers", 1, 64, &t->storage_servers, err)) ||
        (rc = get_int(o, path, "hosts", 1, 16, &t->hosts, err)) ||
        (rc = get_int(o, path, "replication", 1, 3, &t->replication, err)) ||
        (rc = get_choice(o, path, "placement", placements, t->placement, sizeof t->placement, err)) ||
        (rc = get_choice(o, path, "secondary_reads", secondaries, t->secondary, sizeof t->secondary, err)) ||
        (rc = get_choice(o, path, "engine", engines, t->engine, sizeof t->engine, err)))
        return rc;
    if (k == RL_CAMP_SINGLE && (t->storage_servers != 1 || t->replication != 1 || t->hosts != 1)) {
        rl__errdetail_append(err, "%s: a single topology has one storage server on one host (replication 1)", path);
        return RL_E_INVALID_ARGUMENT;
    }
    if (t->replication > t->storage_servers || t->hosts > t->storage_servers) {
        rl__errdetail_append(err, "%s: replication %d and hosts %d must not exceed storage_servers %d", path,
                             t->replication, t->hosts, t->storage_servers);
        return RL_E_INVALID_ARGUMENT;
    }
    if (!strcmp(t->placement, "reports") && k != RL_CAMP_MULTI) {
        rl__errdetail_append(err, "%s.placement: 'reports' places teams: only for multi topologies", path);
        return RL_E_INVALID_ARGUMENT;
    }
    if (strcmp(t->placement, "colocated") && t->storage_servers < 2 * t->replication) {
        rl__errdetail_append(err, "%s: %s placement needs two teams of %d: at least %d storage servers, not %d", path,
                             t->placement, t->replication, 2 * t->replication, t->storage_servers);
        return RL_E_INVALID_ARGUMENT;
    }
    return RL_OK;
}

static int parse_doc(json_t *root, rl__camp_protocol *p, rl__errdetail *err) {
    static const char *const top[] = {"name",   "description", "dataset", "topologies", "cases",      "arms",
                                      "design", "statistics",  "checks",  "keep_data",  "throughput", NULL};
    static const char *const tpk[] = {"clients", "seconds", "warmup_seconds", "cases", NULL};
    static const char *const ds[] = {"records", "seed", "split_padding", NULL};
    static const char *const dz[] = {
        "blocks", "repeats", "seconds", "warmup_seconds", "pipeline_depth", "process_timeout_seconds", NULL};
    static const char *const st[] = {"resamples", "seed", "level", NULL};
    static const char *const ck[] = {"contamination_threshold", "rtt_pings", NULL};
    json_t *v;
    int rc;
    if ((rc = need_object(root, "the protocol", err)) || (rc = check_keys(root, "", top, err))) return rc;
    if ((rc = get_string(root, "", "name", p->name, sizeof p->name, err))) return rc;
    if ((v = json_object_get(root, "description"))) {
        if (!json_is_string(v) || json_string_length(v) >= sizeof p->description) {
            rl__errdetail_append(err, "description: must be a string of at most %zu bytes", sizeof p->description - 1);
            return RL_E_INVALID_ARGUMENT;
        }
        snprintf(p->description, sizeof p->description, "%s", json_string_value(v));
    }
    if ((v = json_object_get(root, "dataset"))) {
        if ((rc = need_object(v, "dataset", err)) || (rc = check_keys(v, "dataset", ds, err)) ||
            (rc = get_int(v, "dataset", "records", 1, RL_CAMP_MAX_RECORDS, &p->records, err)) ||
            (rc = get_u64(v, "dataset", "seed", &p->data_seed, err)) ||
            (rc = get_int(v, "dataset", "split_padding", 1, 9990000, &p->split_padding, err)))
            return rc;
    }
    if ((v = json_object_get(root, "topologies"))) {
        if (!json_is_array(v) || json_array_size(v) < 1 || json_array_size(v) > RL_CAMP_MAX_TOPOLOGIES) {
            rl__errdetail_append(err, "topologies: must be an array of 1 to %d topologies", RL_CAMP_MAX_TOPOLOGIES);
            return RL_E_INVALID_ARGUMENT;
        }
        p->n_topologies = (int)json_array_size(v);
        for (int i = 0; i < p->n_topologies; i++) {
            if ((rc = parse_topology(json_array_get(v, (size_t)i), i, &p->topologies[i], err))) return rc;
            for (int j = 0; j < i; j++)
                if (!strcmp(p->topologies[j].name, p->topologies[i].name)) {
                    rl__errdetail_append(err, "topologies[%d]: the name '%s' is given twice", i, p->topologies[i].name);
                    return RL_E_INVALID_ARGUMENT;
                }
        }
    }
    if ((v = json_object_get(root, "cases"))) {
        if (!json_is_array(v) || json_array_size(v) < 1 || json_array_size(v) > RL_CAMP_MAX_CASES) {
            rl__errdetail_append(err, "cases: must be an array of 1 to %d case names", RL_CAMP_MAX_CASES);
            return RL_E_INVALID_ARGUMENT;
        }
        p->n_cases = (int)json_array_size(v);
        for (int i = 0; i < p->n_cases; i++) {
            json_t *e = json_array_get(v, (size_t)i);
            if (!json_is_string(e)) {
                rl__errdetail_append(err, "cases[%d]: must be a string", i);
                return RL_E_INVALID_ARGUMENT;
            }
            rl__errdetail_append(err, "cases[%d]: ", i);
            if ((rc = rl__camp_case_parse(json_string_value(e), &p->cases[i], err))) return rc;
            rl__errdetail_clear(err);
            for (int j = 0; j < i; j++)
                if (!strcmp(p->cases[j].name, p->cases[i].name)) {
                    rl__errdetail_append(err, "cases[%d]: '%s' is given twice", i, p->cases[i].name);
                    return RL_E_INVALID_ARGUMENT;
                }
        }
    }
    if ((v = json_object_get(root, "arms"))) {
        if (!json_is_array(v) || json_array_size(v) < 1 || json_array_size(v) > RL_CAMP_MAX_ARMS) {
            rl__errdetail_append(err, "arms: must be an array of 1 to %d arms", RL_CAMP_MAX_ARMS);
            return RL_E_INVALID_ARGUMENT;
        }
        p->n_arms = (int)json_array_size(v);
        for (int i = 0; i < p->n_arms; i++) {
            json_t *e = json_array_get(v, (size_t)i);
            int a = json_is_string(e) ? rl__camp_arm_of(json_string_value(e)) : -1;
            if (a < 0) {
                rl__errdetail_append(err, "arms[%d]: must be one of ordinary, remote, remote-grouped, adaptive, sqlite",
                                     i);
                return RL_E_INVALID_ARGUMENT;
            }
            for (int j = 0; j < i; j++)
                if ((int)p->arms[j] == a) {
                    rl__errdetail_append(err, "arms[%d]: '%s' is given twice", i, arm_names[a]);
                    return RL_E_INVALID_ARGUMENT;
                }
            p->arms[i] = (rl__camp_arm)a;
        }
    }
    int has[RL_CAMP_ARM_KINDS] = {0};
    for (int i = 0; i < p->n_arms; i++) has[p->arms[i]] = 1;
    if (!has[RL_CAMP_ORDINARY] || (has[RL_CAMP_ADAPTIVE] && !has[RL_CAMP_REMOTE])) {
        rl__errdetail_append(err, "%s",
                             "arms: every ratio is taken against ordinary (and adaptive's against the best of "
                             "ordinary and remote): list ordinary, and remote with adaptive");
        return RL_E_INVALID_ARGUMENT;
    }
    if ((v = json_object_get(root, "design"))) {
        if ((rc = need_object(v, "design", err)) || (rc = check_keys(v, "design", dz, err)) ||
            (rc = get_int(v, "design", "blocks", 1, RL_CAMP_MAX_BLOCKS, &p->blocks, err)) ||
            (rc = get_int(v, "design", "repeats", 1, RL_CAMP_MAX_REPEATS, &p->repeats, err)) ||
            (rc = get_double(v, "design", "seconds", 0.001, 3600, 0, 0, &p->seconds, err)) ||
            (rc = get_double(v, "design", "warmup_seconds", 0, 3600, 0, 0, &p->warmup_seconds, err)) ||
            (rc = get_int(v, "design", "pipeline_depth", 1, 1000, &p->pipeline_depth, err)) ||
            (rc = get_double(v, "design", "process_timeout_seconds", 0, 86400, 0, 0, &p->process_timeout_seconds, err)))
            return rc;
    }
    if ((v = json_object_get(root, "statistics"))) {
        if ((rc = need_object(v, "statistics", err)) || (rc = check_keys(v, "statistics", st, err)) ||
            (rc = get_int(v, "statistics", "resamples", 1, 1000000, &p->resamples, err)) ||
            (rc = get_u64(v, "statistics", "seed", &p->bootstrap_seed, err)) ||
            (rc = get_double(v, "statistics", "level", 0, 1, 1, 1, &p->level, err)))
            return rc;
    }
    if ((v = json_object_get(root, "checks"))) {
        if ((rc = need_object(v, "checks", err)) || (rc = check_keys(v, "checks", ck, err)) ||
            (rc = get_double(v, "checks", "contamination_threshold", 0, 1, 0, 0, &p->contamination_threshold, err)) ||
            (rc = get_int(v, "checks", "rtt_pings", 1, 10000, &p->rtt_pings, err)))
            return rc;
    }
    p->n_tp_clients = 0; /* absent: no throughput phase */
    if ((v = json_object_get(root, "throughput"))) {
        json_t *a;
        if ((rc = need_object(v, "throughput", err)) || (rc = check_keys(v, "throughput", tpk, err)) ||
            (rc = get_double(v, "throughput", "seconds", 0.01, 3600, 0, 0, &p->tp_seconds, err)) ||
            (rc = get_double(v, "throughput", "warmup_seconds", 0, 3600, 0, 0, &p->tp_warmup_seconds, err)))
            return rc;
        if ((a = json_object_get(v, "clients"))) {
            if (!json_is_array(a) || json_array_size(a) > RL_CAMP_MAX_TP_LEVELS) {
                rl__errdetail_append(err, "throughput.clients: must be an array of at most %d client counts",
                                     RL_CAMP_MAX_TP_LEVELS);
                return RL_E_INVALID_ARGUMENT;
            }
            for (size_t i = 0; i < json_array_size(a); i++) {
                json_t *e = json_array_get(a, i);
                if (!json_is_integer(e) || json_integer_value(e) < 1 ||
                    json_integer_value(e) > RL_CAMP_MAX_TP_CLIENTS) {
                    rl__errdetail_append(err, "throughput.clients[%zu]: must be an integer in [1, %d]", i,
                                         RL_CAMP_MAX_TP_CLIENTS);
                    return RL_E_INVALID_ARGUMENT;
                }
                p->tp_clients[i] = (int)json_integer_value(e);
            }
            p->n_tp_clients = (int)json_array_size(a);
        } else {
            rl__camp_protocol full;
            rl__camp_protocol_builtin(0, &full);
            memcpy(p->tp_clients, full.tp_clients, sizeof p->tp_clients);
            p->n_tp_clients = full.n_tp_clients;
        }
        if ((a = json_object_get(v, "cases"))) {
            if (!json_is_array(a) || json_array_size(a) < 1 || json_array_size(a) > RL_CAMP_MAX_TP_CASES) {
                rl__errdetail_append(err, "throughput.cases: must be an array of 1 to %d case names",
                                     RL_CAMP_MAX_TP_CASES);
                return RL_E_INVALID_ARGUMENT;
            }
            p->n_tp_cases = (int)json_array_size(a);
            for (int i = 0; i < p->n_tp_cases; i++) {
                json_t *e = json_array_get(a, (size_t)i);
                if (!json_is_string(e)) {
                    rl__errdetail_append(err, "throughput.cases[%d]: must be a string", i);
                    return RL_E_INVALID_ARGUMENT;
                }
                rl__errdetail_append(err, "throughput.cases[%d]: ", i);
                if ((rc = rl__camp_case_parse(json_string_value(e), &p->tp_cases[i], err))) return rc;
                rl__errdetail_clear(err);
            }
        }
    }
    if ((v = json_object_get(root, "keep_data"))) {
        if (!json_is_boolean(v)) {
            rl__errdetail_append(err, "keep_data: must be true or false");
            return RL_E_INVALID_ARGUMENT;
        }
        p->keep_data = json_is_true(v);
    }
    return RL_OK;
}

int rl__camp_protocol_parse(const char *text, size_t len, rl__camp_protocol *out, rl__errdetail *err) {
    json_error_t jerr;
    rl__camp_protocol p;
    int rc;
    rl__camp_protocol_builtin(0, &p);
    p.description[0] = 0; /* the full protocol's text would describe another campaign */
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        rl__errdetail_append(err, "not valid JSON: %s at line %d column %d", jerr.text, jerr.line, jerr.column);
        return RL_E_INVALID_ARGUMENT;
    }
    rc = parse_doc(root, &p, err);
    json_decref(root);
    if (!rc) *out = p;
    return rc;
}

/* ---- Printing ---------------------------------------------------------------------------------- */

static void put_str(rl_buf *b, const char *s) {
    rl__buf_append_byte(b, '"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') rl__buf_printf(b, "\\%c", c);
        else if (c == '\n') rl__buf_append_str(b, "\\n");
        else if (c < 0x20) rl__buf_printf(b, "\\u%04x", c);
        else rl__buf_append_byte(b, c);
    }
    rl__buf_append_byte(b, '"');
}

int rl__camp_protocol_print(const rl__camp_protocol *p, rl_buf *b) {
    rl__buf_append_str(b, "{\n  \"name\": ");
    put_str(b, p->name);
    rl__buf_append_str(b, ",\n  \"description\": ");
    put_str(b, p->description);
    rl__buf_printf(b, ",\n  \"dataset\": {\"records\": %d, \"seed\": %llu, \"split_padding\": %d},\n", p->records,
                   (unsigned long long)p->data_seed, p->split_padding);
    rl__buf_append_str(b, "  \"topologies\": [\n");
    for (int i = 0; i < p->n_topologies; i++) {
        const rl__camp_topology *t = &p->topologies[i];
        rl__buf_append_str(b, "    {\"name\": ");
        put_str(b, t->name);
        rl__buf_printf(b, ", \"kind\": \"%s\", \"delay_us\": %d", kind_names[t->kind], t->delay_us);
        if (t->kind == RL_CAMP_FDB) {
            rl__buf_append_str(b, ", \"url\": ");
            put_str(b, t->url);
        } else if (t->kind != RL_CAMP_EMBEDDED)
            rl__buf_printf(b,
                           ", \"jitter_us\": %d, \"storage_servers\": %d, \"hosts\": %d, \"replication\": %d,"
                           " \"placement\": \"%s\", \"secondary_reads\": \"%s\", \"engine\": \"%s\"",
                           t->jitter_us, t->storage_servers, t->hosts, t->replication, t->placement, t->secondary,
                           t->engine);
        rl__buf_printf(b, "}%s\n", i + 1 < p->n_topologies ? "," : "");
    }
    rl__buf_append_str(b, "  ],\n  \"cases\": [");
    for (int i = 0; i < p->n_cases; i++) {
        rl__buf_append_str(b, i % 4 ? ", " : i ? ",\n    " : "\n    ");
        put_str(b, p->cases[i].name);
    }
    rl__buf_append_str(b, "\n  ],\n  \"arms\": [");
    for (int i = 0; i < p->n_arms; i++) rl__buf_printf(b, "%s\"%s\"", i ? ", " : "", arm_names[p->arms[i]]);
    rl__buf_printf(b,
                   "],\n  \"design\": {\"blocks\": %d, \"repeats\": %d, \"seconds\": %.15g, \"warmup_seconds\": %.15g,"
                   " \"pipeline_depth\": %d, \"process_timeout_seconds\": %.15g},\n",
                   p->blocks, p->repeats, p->seconds, p->warmup_seconds, p->pipeline_depth, p->process_timeout_seconds);
    rl__buf_printf(b, "  \"statistics\": {\"resamples\": %d, \"seed\": %llu, \"level\": %.15g},\n", p->resamples,
                   (unsigned long long)p->bootstrap_seed, p->level);
    rl__buf_printf(b, "  \"checks\": {\"contamination_threshold\": %.15g, \"rtt_pings\": %d},\n",
                   p->contamination_threshold, p->rtt_pings);
    rl__buf_printf(b, "  \"keep_data\": %s", p->keep_data ? "true" : "false");
    if (p->n_tp_clients) {
        rl__buf_append_str(b, ",\n  \"throughput\": {\"clients\": [");
        for (int i = 0; i < p->n_tp_clients; i++) rl__buf_printf(b, "%s%d", i ? ", " : "", p->tp_clients[i]);
        rl__buf_printf(b, "], \"seconds\": %.15g, \"warmup_seconds\": %.15g, \"cases\": [", p->tp_seconds,
                       p->tp_warmup_seconds);
        for (int i = 0; i < p->n_tp_cases; i++) {
            if (i) rl__buf_append_str(b, ", ");
            put_str(b, p->tp_cases[i].name);
        }
        rl__buf_append_str(b, "]}");
    }
    rl__buf_append_str(b, "\n}\n");
    return rl__buf_error(b);
}
