/* campaign_int.h (internal to src/bench/campaign*.c) — what the campaign's files share: a
 * connection to one case's data (the reclayer store and the SQLite peer), one query op with its
 * per-op figures, the dataset steps, and the topology hooks.
 *
 * Topologies (campaign_topology.c) sit behind rl__camp_topo_vtable so the runner never asks which kind
 * it drives. embedded is available; single is available with or without an injected delay (a
 * local cluster through src/app/cluster_admin.h, the delay on the client's links); multi is a
 * cluster on several hosts with teams placed by src/app/placement_store.h; fdb is an existing
 * database through the fdb: backend (FoundationDB's client library). What each hook does is
 * written above it.
 */
#ifndef RL_BENCH_CAMPAIGN_INT_H
#define RL_BENCH_CAMPAIGN_INT_H

#include <jansson.h>
#include <sqlite3.h>

#include "base/errdetail.h"
#include "bench/campaign.h"
#include "reclayer/query.h"
#include "record/layout.h"
#include "app/tool.h"

/* The text of an rl_buf (its bytes are uint8_t; they are text here). */
static inline const char *rl__camp_str(const rl_buf *b) { return (const char *)b->data; }

/* ---- One case's data, and one op ---------------------------------------------------------- */

/* An open connection to the data of one variant. Zero it before rl__camp_conn_open. */
typedef struct {
    rl__tool t;           /* the database (read-only), the Order metadata and the store */
    sqlite3 *sq;          /* the SQLite peer (NULL unless opened) */
    sqlite3_stmt *sel[2]; /* ORDER BY price, order_id ASC / DESC, LIMIT ? OFFSET ? */
    sqlite3_stmt *begin, *commit;
    int embedded; /* the database is in this process (file:, mem:): no requests */
} rl__camp_conn;

/* Open url/store read-only, and the SQLite peer at sqlite_path when it is not NULL. On failure c
 * is closed and err says why. */
int rl__camp_conn_open(rl__camp_conn *c, const char *url, const char *store, const char *sqlite_path,
                       rl__errdetail *err);
void rl__camp_conn_close(rl__camp_conn *c);

/* Sums over the ops of a loop (per-op figures are these divided by ops). */
typedef struct {
    uint64_t ops;
    uint64_t rows, index_entries, client_reads, mapped_requests, record_loads, kv_bytes;
    uint64_t requests, round_trips, net_bytes_received;
    int net_uncounted;  /* requests and round trips are not known (a networked backend whose
                              * counters the query layer does not carry yet): report them as null */
    uint64_t hash;      /* the rows (order_ids in order) of the last op, folded */
    uint64_t last_rows; /* rows of the last op */
} rl__camp_sums;

/* Run the case once with the arm (SQLite or a fetch method), reading every field of every row,
 * adding to s. Returns RL_OK, RL_E_UNSUPPORTED_OPERATION (the arm is not available; the detail in
 * err), or the query's error with its detail in err. */
int rl__camp_op(rl__camp_conn *c, const rl__camp_case *k, rl__camp_arm arm, int pipeline_depth, rl__camp_sums *s,
                rl__errdetail *err);

/* SQLite's allocations (a counting wrapper installed before SQLite initialises; process-global,
 * like SQLite's allocator). rl__camp_sqlite_count_install returns 1 if counting. */
int rl__camp_sqlite_count_install(void);
void rl__camp_sqlite_counts(uint64_t *out_allocs, uint64_t *out_bytes);

/* ---- Dataset (campaign_dataset.c) ------------------------------------------------------------ */

/* Load p->records Orders (padding bytes each, 0 for small) into store at url (created: split long
 * records, record versions, as `rl load`). RL_OK or the error with err. */
int rl__camp_load(const char *url, const char *store, const rl__camp_protocol *p, int padding, rl__errdetail *err);
/* Run the integrity checker on url/store (read-only) into *out: {"url", "store", "records",
 * "index_entries", "integrity_ok", "defects": [{"kind", "key", "message"}]}. */
int rl__camp_integrity(const char *url, const char *store, json_t **out, rl__errdetail *err);
/* The three defect controls on a scratch database at url: for each of delete-chunk, stray-suffix,
 * version-key a fresh store holding a copy of the dataset's first 10 split records (the same
 * generator and seed), checked clean, then the defect injected and checked again. *out: an array
 * of {"defect", "clean_before", "integrity_ok_after", "found": [kinds], "expected", "passed"}.
 * *out_passed: every control was clean before and failed after with the expected kind. */
int rl__camp_defect_controls(const char *url, const rl__camp_protocol *p, json_t **out, int *out_passed,
                             rl__errdetail *err);
/* Make the SQLite peer at path (created; must not exist) from every record of url/store, read back
 * through the store (so both hold the same records). */
int rl__camp_sqlite_peer(const char *url, const char *store, const char *path, rl__errdetail *err);
/* The embedded placement receipt of url/store: {"kind": "layout", "url", "store", "keys",
 * "key_bytes", "value_bytes", "record_keys", "index_entries", "other_keys", "keys_xxh64"} over the
 * store's whole key range, read at one version. */
int rl__camp_layout_receipt(const char *url, const char *store, json_t **out, rl__errdetail *err);
/* Add the cluster's placement to a receipt: the count and a hash of the shard map
 * (\xff/keyServers/) and of the server list (\xff/serverList/), read at one version:
 * "shard_map_entries", "server_list_entries", "shard_map_xxh64". */
int rl__camp_shard_receipt(const char *url, json_t *into, rl__errdetail *err);

/* ---- Topologies (campaign_topology.c) -------------------------------------------------------- */

#define RL_CAMP_PATH_MAX 1100 /* URLs and files under a topology's directory */
#define RL_CAMP_DIR_MAX 1000  /* the topology's directory (the runner refuses longer --out paths) */
#define RL_CAMP_MAX_OWNED_PIDS 80

typedef struct rl__camp_topo rl__camp_topo;

/* The hooks of one topology kind. Each returns RL_OK or an error with err; json results are the
 * caller's (json_decref). */
typedef struct {
    const char *kind;
    /* Can this build run it? RL_OK, or RL_E_UNSUPPORTED_OPERATION with the reason in why.
     * cluster: RL_OK once rl__cluster_up and the placement admin operations exist. */
    int (*available)(const rl__camp_topology *t, rl__errdetail *why);
    /* Bring it up under tp->dir and fill tp->url/store/sqlite per variant and tp->pids (processes
     * of the campaign that are not reaped children: counted as the campaign's CPU).
     * cluster: rl__cluster_up (storage_servers, hosts, replication, engine, secondary_reads,
     * delay_us/jitter_us), one url "cluster:DIR/reclayer.cluster" for both variants, stores
     * ["bench","small"] / ["bench","split"], no SQLite peer; pids from pids.json. */
    int (*up)(rl__camp_topo *tp, rl__errdetail *err);
    /* After loading: place the stores (cluster: split shards at the index and records prefixes
     * and assign teams per the topology's placement, then wait for the moves). embedded: nothing. */
    int (*place)(rl__camp_topo *tp, rl__errdetail *err);
    /* The round trip now: {"applicable": bool, "pings", "min_us", "p50_us", "p99_us", "max_us"}
     * (embedded: applicable false with the reason). cluster: `pings` pings through rl ping's
     * library path to every storage server and the coordinator; with a delay also
     * "expected_min_p50_us" (2 x delay_us) and "shows_delay" (p50 >= it; false is a failed check). */
    int (*rtt)(rl__camp_topo *tp, int pings, json_t **out, rl__errdetail *err);
    /* The placement receipt of variant v's store (compared before and after every case).
     * embedded: rl__camp_layout_receipt. cluster: rl placement's receipt (shard boundaries, the
     * teams of the index and of the records, the server-disjoint fraction) at a read version. */
    int (*receipt)(rl__camp_topo *tp, rl__camp_variant v, json_t **out, rl__errdetail *err);
    /* After the last case: remove the injected delay and probe again (restoration), as rtt plus
     * "removed_delay_us", "processes_set" and "restored" (p50 < 2 x the removed delay; false is a
     * failed check). embedded, or no delay: applicable false. */
    int (*restore)(rl__camp_topo *tp, int pings, json_t **out, rl__errdetail *err);
    /* Stop what up started (cluster: rl__cluster_down by the recorded pids). Never fails. */
    void (*down)(rl__camp_topo *tp);
} rl__camp_topo_vtable;

struct rl__camp_topo {
    const rl__camp_topology *t; /* the protocol's (borrowed) */
    const rl__camp_protocol *p; /* borrowed */
    const rl__camp_topo_vtable *ops;
    char dir[RL_CAMP_DIR_MAX];                               /* DIR/data/NAME: everything the topology writes */
    char url[RL_CAMP_VARIANTS][RL_CAMP_PATH_MAX];            /* loading, checks, placement, receipts */
    char query_url[RL_CAMP_VARIANTS][RL_CAMP_PATH_MAX + 32]; /* the rows check and the workers: url plus,
                                                         * on a cluster, ?secondary=STRATEGY */
    char store[RL_CAMP_VARIANTS][192];                       /* the store's tuple path as JSON */
    char sqlite[RL_CAMP_VARIANTS][RL_CAMP_PATH_MAX];         /* "" when the topology has no SQLite peer */
    char control_url[RL_CAMP_PATH_MAX];                      /* the scratch database of the defect controls */
    int pids[RL_CAMP_MAX_OWNED_PIDS];
    int n_pids;
    int loaded[RL_CAMP_VARIANTS]; /* set by the runner before `place`: the variants loaded */
    char placed_text[256];        /* multi: the teams `place` used, e.g. "index {1,3}, records {5,2} {4,6}" */
    json_t *place_info;           /* set by `place` or NULL (placement "reports": the plan and its
                                   * check): recorded as the topology's "placement"."plan", released
                                   * by the runner */
    json_t *info;                 /* set by `up` or NULL (fdb: the backend's status): recorded in the
                                   * topology's results as "backend" and released by the runner */
};

/* The hooks of kind k (never NULL). */
const rl__camp_topo_vtable *rl__camp_topo_ops(rl__camp_topo_kind k);
const char *rl__camp_topo_kind_name(rl__camp_topo_kind k);

/* ---- Reports (report.c, report_plot.c, report_manifest.c, report_results.c) ------------------ */

/* The results file a run writes (DIR/results.json.zst: the JSON text below, zstd-compressed), how
 * its JSON is printed, and the most a reader decompresses (report_results.c). */
#define RL_CAMP_RESULTS_NAME "results.json.zst"
#define RL_CAMP_RESULTS_JSON_FLAGS (JSON_INDENT(1) | JSON_REAL_PRECISION(17))
#define RL_CAMP_RESULTS_MAX (1 << 30)

/* Write the results document to DIR/results.json.zst (one zstd frame, with its size and checksum,
 * of its JSON text printed with RL_CAMP_RESULTS_JSON_FLAGS). Borrows results. RL_OK, RL_E_IO_ERROR, RL_E_OUT_OF_MEMORY or
 * RL_E_INTERNAL_ERROR, with the path in err. */
int rl__camp_results_write(const char *dir, json_t *results, rl__errdetail *err);
/* Read a run's results: path is a run's directory (its results.json.zst, else its results.json)
 * or a file, compressed or not (told by its first bytes). *out: the document (the caller's:
 * json_decref), NULL on error. RL_OK, RL_E_FILE_NOT_FOUND, RL_E_IO_ERROR, RL_E_CORRUPT_DATA (not
 * zstd nor JSON, a damaged or truncated frame, over RL_CAMP_RESULTS_MAX) or RL_E_OUT_OF_MEMORY,
 * with the file and the reason in err. */
int rl__camp_results_load(const char *path, json_t **out, rl__errdetail *err);

/* Write DIR/report.md and DIR/report.html (rl__camp_html_write, with manifest: borrowed, may be
 * NULL) from the results document; print the main table to out (may be NULL). RL_OK,
 * RL_E_IO_ERROR or RL_E_OUT_OF_MEMORY with the file in err. */
int rl__camp_report_write(const char *dir, json_t *results, json_t *manifest, FILE *out, rl__errdetail *err);
/* Write DIR/report.html from report.md's text md (md_len bytes; borrowed) and the manifest
 * (borrowed, may be NULL): one self-contained page, the SVG plots named in md inlined
 * (report_html.c). RL_OK, RL_E_IO_ERROR or RL_E_OUT_OF_MEMORY with the file in err. */
int rl__camp_html_write(const char *dir, const char *md, size_t md_len, json_t *manifest, rl__errdetail *err);

/* The reference reports' figures as the results document records them (campaign_reference.c):
 * {"reports": [{"report", "title", "file", "topology_kind", "setup"}], "figures": [{"report",
 * "file", "topology_kind", "case", "metric", "line", "quote", "ratio", "ci_low", "ci_high",
 * "range_low", "range_high", "remote_ms", "ordinary_ms"} (null where not published)], "rtt":
 * {"report", "p50_ms", "p99_ms", "min_ms", "max_ms", "line", ...}}. A new reference (the
 * caller's), NULL when out of memory. */
json_t *rl__camp_reference_json(void);

/* rl__camp_compare — append to out the table of what changed from run a to run b (report_compare.c):
 * per (topology, case, comparison, metric) both ratios with their intervals, B/A, whether the
 * intervals overlap and the ratios point the same way; metric NULL: every metric. name_a, name_b:
 * how the runs are named in the text. Borrows everything; an error stays in out (rl__buf_error). */
void rl__camp_compare(json_t *a, json_t *b, const char *name_a, const char *name_b, const char *metric, rl_buf *out);

/* The CSV files (report_csv.c): DIR/samples.csv, one row per sample, and DIR/summary.csv, one row
 * per (topology, case, arm, metric) with the arm's medians and, for a compared arm, its ratio and
 * interval. Borrows results. RL_OK, RL_E_IO_ERROR or RL_E_OUT_OF_MEMORY with the file in err. */
#define RL_CAMP_SAMPLES_CSV "samples.csv"
#define RL_CAMP_SUMMARY_CSV "summary.csv"
#define RL_CAMP_THROUGHPUT_CSV "throughput.csv" /* one row per throughput level */
int rl__camp_csv_write(const char *dir, json_t *results, rl__errdetail *err);
/* Parse CSV text (RFC 4180, as rl__camp_csv_write writes it) into *out: an array of rows, each an
 * array of strings, the header first (the caller's, json_decref). Every row must have the header's
 * number of fields. RL_OK, RL_E_CORRUPT_DATA (err names the line) or RL_E_OUT_OF_MEMORY. */
int rl__camp_csv_parse(const char *text, size_t len, json_t **out, rl__errdetail *err);
/* Append the main table (markdown) of the results to b. */
void rl__camp_report_main_table(json_t *results, rl_buf *b);
/* Draw DIR/plots/NAME.svg and NAME.png with gnuplot; *out describes what was drawn or why not:
 * {"gnuplot": path or null, "png_terminal": "pngcairo"|"png"|null, "files": [...], "error"}. */
int rl__camp_plots(const char *dir, json_t *results, json_t **out, rl__errdetail *err);
/* The manifest document (see report_manifest.c). */
int rl__camp_manifest(const rl__camp_run_options *o, const char *self_exe, json_t **out, rl__errdetail *err);

#endif
