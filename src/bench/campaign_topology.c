/* campaign_topology.c — the campaign's topologies behind one table of hooks (campaign_int.h).
 *
 * embedded: each variant in its own file: database under DIR/data/NAME/ (small/, split/), so a
 *   worker opens only the data its case reads; the SQLite peer beside it (small.sqlite,
 *   split.sqlite); the defect controls' scratch database in control/. No network: the RTT probe and
 *   the restoration are recorded as not applicable. The placement receipt is the layout of the
 *   case's store (rl__camp_layout_receipt).
 * single: a local cluster (rl__cluster_up of src/app/cluster_admin.h: one coordinator and the
 *   protocol's storage servers on 127.0.0.1, in DIR/data/NAME/cluster, the processes dying with the
 *   campaign), both stores in it under ("bench", "small") and ("bench", "split"), no SQLite peer.
 *   The RTT probe is `pings` PINGs to every process through the client's connections (rl ping's
 *   path, rl__db_cluster_ping_stats' PING); the receipt is the
 *   store's layout read through the cluster plus a hash of the shard map (\xff/keyServers/) and the
 *   server list (\xff/serverList/). An injected delay (delay_us, jitter_us) is passed to
 *   rl__cluster_up: every process is on host1 and the client on its own label, so the delay is on
 *   every client link; each probe says whether its p50 shows it (>= 2 x delay_us), and the
 *   restoration sets it to 0 (rl__cluster_delay) and probes again.
 * multi: as single, with the protocol's hosts (storage_servers / hosts servers on each, host h on
 *   127.0.0.h), replication and delay (between hosts and to the client); `place` puts each store's
 *   index price_idx on one team and its records on teams disjoint from it (placement disjoint) or
 *   on the index's team (colocated) with rl placement place's library, which returns once the moves
 *   are done; the receipt adds rl placement show's (teams and server-/host-disjoint fractions).
 *   The rows check and the workers open url?secondary=STRATEGY (the protocol's secondary_reads).
 *   Placement "reports" (the M2 report's, reproduced explicitly): the small store disjoint, the split
 *   store as place_reports_split says (rows1000 0.70 server-disjoint, rows10 colocated).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "bench/campaign_int.h"
#include "bench/campaign_proc.h"
#include "app/placement_store.h"
#include "kv/cluster/cluster.h"
#include "kv/fdb/fdb.h"
#include "net/proto.h"
#include "app/cluster_admin.h"

static const char *const kind_names[] = {"embedded", "single", "multi", "fdb"};

const char *rl__camp_topo_kind_name(rl__camp_topo_kind k) { return (unsigned)k < 4 ? kind_names[k] : "unknown"; }

/* mkdir path (0700); an existing directory is fine. */
static int make_dir(const char *path, rl__errdetail *err) {
    if (mkdir(path, 0700) == 0 || errno == EEXIST) return RL_OK;
    rl__errdetail_append(err, "cannot create %s: %s", path, strerror(errno));
    return errno == ENOSPC ? RL_E_NO_SPACE : RL_E_IO_ERROR;
}

static json_t *not_applicable(const char *why) { return json_pack("{s:b, s:s}", "applicable", 0, "reason", why); }

/* ---- embedded ---------------------------------------------------------------------------------- */

static int emb_available(const rl__camp_topology *t, rl__errdetail *why) {
    (void)t;
    (void)why;
    return RL_OK;
}

static int emb_up(rl__camp_topo *tp, rl__errdetail *err) {
    char path[RL_CAMP_DIR_MAX + 32];
    int rc;
    if ((rc = make_dir(tp->dir, err))) return rc;
    for (int v = 0; v < RL_CAMP_VARIANTS; v++) {
        const char *name = rl__camp_variant_name((rl__camp_variant)v);
        snprintf(path, sizeof path, "%s/%s", tp->dir, name);
        if ((rc = make_dir(path, err))) return rc;
        snprintf(tp->url[v], sizeof tp->url[v], "file:%s", path);
        snprintf(tp->query_url[v], sizeof tp->query_url[v], "%s", tp->url[v]);
        snprintf(tp->store[v], sizeof tp->store[v], "[\"bench\",\"%s\"]", name);
        snprintf(tp->sqlite[v], sizeof tp->sqlite[v], "%s/%s.sqlite", tp->dir, name);
    }
    snprintf(path, sizeof path, "%s/control", tp->dir);
    if ((rc = make_dir(path, err))) return rc;
    snprintf(tp->control_url, sizeof tp->control_url, "file:%s", path);
    tp->n_pids = 0;
    return RL_OK;
}

static int emb_place(rl__camp_topo *tp, rl__errdetail *err) {
    (void)tp;
    (void)err;
    return RL_OK;
}

static int emb_rtt(rl__camp_topo *tp, int pings, json_t **out, rl__errdetail *err) {
    (void)tp, (void)pings, (void)err;
    *out = not_applicable("embedded: no network between the client and the data");
    return RL_OK;
}

static int emb_receipt(rl__camp_topo *tp, rl__camp_variant v, json_t **out, rl__errdetail *err) {
    return rl__camp_layout_receipt(tp->url[v], tp->store[v], out, err);
}

static int emb_restore(rl__camp_topo *tp, int pings, json_t **out, rl__errdetail *err) {
    (void)tp, (void)pings, (void)err;
    *out = not_applicable("embedded: no injected delay to remove");
    return RL_OK;
}

static void emb_down(rl__camp_topo *tp) { (void)tp; }

/* ---- single, multi (the cluster) --------------------------------------------------------------- */

/* The cluster's directory under the topology's. */
static void cluster_dir(const rl__camp_topo *tp, char *out, size_t cap) { snprintf(out, cap, "%s/cluster", tp->dir); }

static int cl_available(const rl__camp_topology *t, rl__errdetail *why) {
    rl_buf self;
    char path[RL_CAMP_PATH_MAX + 16];
    if (t->kind == RL_CAMP_MULTI && t->storage_servers % t->hosts) {
        rl__errdetail_append(why, "multi: %d storage servers do not spread evenly over %d hosts", t->storage_servers,
                             t->hosts);
        return RL_E_UNSUPPORTED_OPERATION;
    }
    rl__buf_init(&self);
    int rc = rl__camp_self_exe(&self);
    if (!rc) {
        char *slash = strrchr((char *)self.data, '/');
        if (slash) *slash = 0;
        snprintf(path, sizeof path, "%s/rlkvd", rl__camp_str(&self));
        if (access(path, X_OK) != 0) {
            rl__errdetail_append(why, "%s is not built (the cluster's server)", path);
            rc = RL_E_UNSUPPORTED_OPERATION;
        }
    }
    rl__buf_release(&self);
    return rc;
}

static int cl_up(rl__camp_topo *tp, rl__errdetail *err) {
    char dir[RL_CAMP_DIR_MAX + 16];
    rl__cluster_up_opts o;
    int rc;
    if ((rc = make_dir(tp->dir, err))) return rc;
    cluster_dir(tp, dir, sizeof dir);
    memset(&o, 0, sizeof o);
    o.n_storage = tp->t->storage_servers;
    o.flags = RL_CLUSTER_DIE_WITH_PARENT; /* never outlive the campaign, even if it is killed */
    /* The injected delay: every process of single is on host1, the client on its own label
     * ("client"), so the delay is on every client link and on none between the servers. */
    o.delay_us = (uint32_t)tp->t->delay_us;
    o.jitter_us = (uint32_t)tp->t->jitter_us;
    o.engine = !strcmp(tp->t->engine, "ssd") ? "ssd" : NULL; /* the storage servers' engine */
    if (tp->t->kind == RL_CAMP_MULTI) {
        /* hosts x storage_servers/hosts servers, host h on 127.0.0.h: the delay is between hosts
         * and to the client; the teams are place's. */
        o.n_storage = 0;
        o.n_hosts = tp->t->hosts;
        o.storage_per_host = tp->t->storage_servers / tp->t->hosts;
        o.host_addresses = 1;
        o.replication = tp->t->replication;
    }
    if ((rc = rl__cluster_up(dir, &o, err))) return rc;
    for (int v = 0; v < RL_CAMP_VARIANTS; v++) {
        snprintf(tp->url[v], sizeof tp->url[v], "cluster:%s/reclayer.cluster", dir);
        /* the protocol's secondary_reads: the strategy of the mapped reads' remote secondaries */
        snprintf(tp->query_url[v], sizeof tp->query_url[v], "%s?secondary=%s", tp->url[v], tp->t->secondary);
        snprintf(tp->store[v], sizeof tp->store[v], "[\"bench\",\"%s\"]", rl__camp_variant_name((rl__camp_variant)v));
        tp->sqlite[v][0] = 0; /* the SQLite peer is an embedded arm */
    }
    snprintf(tp->control_url, sizeof tp->control_url, "%s", tp->url[0]);
    tp->n_pids = 0;
    for (uint32_t id = 0; id <= (uint32_t)tp->t->storage_servers && tp->n_pids < RL_CAMP_MAX_OWNED_PIDS; id++) {
        int pid = 0;
        if ((rc = rl__cluster_pid(dir, id, &pid, NULL, err))) return rc;
        if (pid > 0) tp->pids[tp->n_pids++] = pid;
    }
    return RL_OK;
}

/* The teams of a multi topology's placement, from the protocol's hosts H, storage servers N (S = N/H
 * per host: server id i on host (i-1)/S + 1) and replication R. The index team is the first server
 * of each of hosts 1..R. disjoint: the other servers, taken host by host in turn (the k-th server
 * of every host, then the (k+1)-th), cut into teams of R, so a team's servers are on distinct hosts
 * whenever H >= R; any remainder joins no team. colocated: one records team, the index's.
 * Pure; returns the number of record teams (at most RL_CAMP_MAX_TEAMS). */
#define RL_CAMP_MAX_TEAMS 16
static int multi_teams(const rl__camp_topology *t, uint32_t *index_team, uint32_t rec[][3]) {
    int h_n = t->hosts, per = t->storage_servers / t->hosts, r = t->replication, n = 0;
    uint32_t rest[RL_CLUSTER_MAX_STORAGE];
    for (int j = 0; j < r; j++) index_team[j] = (uint32_t)((j % h_n) * per + j / h_n + 1);
    if (!strcmp(t->placement, "colocated")) {
        memcpy(rec[0], index_team, (size_t)r * sizeof *index_team);
        return 1;
    }
    for (int k = 0; k < per; k++)
        for (int h = 0; h < h_n; h++) {
            uint32_t id = (uint32_t)(h * per + k + 1);
            int in_index = 0;
            for (int j = 0; j < r; j++) in_index |= index_team[j] == id;
            if (!in_index && n < RL_CLUSTER_MAX_STORAGE) rest[n++] = id;
        }
    int teams = 0;
    for (int i = 0; i + r <= n && teams < RL_CAMP_MAX_TEAMS; i += r, teams++)
        memcpy(rec[teams], rest + i, (size_t)r * sizeof *rest);
    return teams;
}

static void team_text(rl_buf *b, const uint32_t *team, int n) {
    rl__buf_append_str(b, "{");
    for (int j = 0; j < n; j++) rl__buf_printf(b, "%s%u", j ? "," : "", team[j]);
    rl__buf_append_str(b, "}");
}

/* The disjoint fraction of the first `rows` rows of a case read in `order` (ids by price, then id;
 * reverse: from the end): the share of them whose record is not on the index's team. */
static double planned_fraction(const int64_t *order, const uint8_t *col, int n, int rows, int reverse) {
    int l = rows < n ? rows : n, d = 0;
    for (int i = 0; i < l; i++) d += !col[order[reverse ? n - 1 - i : i] - 1];
    return l ? (double)d / l : 0;
}

static const int64_t *sort_seed_prices; /* qsort's context: the prices of ids 1..n */
static int cmp_by_price(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    int64_t px = sort_seed_prices[x - 1], py = sort_seed_prices[y - 1];
    return px != py ? (px < py ? -1 : 1) : (x < y ? -1 : x > y);
}

/* placement "reports", the split store (the M2 report's placement, reproduced on purpose): the
 * index on its team (one shard), the records over several shards: the 10 rows of rows10 forward
 * and reverse (the first and last 10 by price, then order_id: the generator's prices,
 * rl__tool_order_price) and then the lowest order_ids, up to 30% of the records, on the index's own
 * team (colocated); every other record, in order_id order, split evenly over the teams disjoint from
 * the index's. So rows1000 reads a server-disjoint fraction of 0.70 (1,000 records), rows10 0 —
 * and limit1 0 too, its row being rows10's first (the report's limit1 rows were cross-server: not
 * reproducible together with colocated rows10 on this dataset). Checked after the moves: the
 * placement receipt's server-disjoint count must be the plan's. *out_plan: the plan (the caller's). */
static int place_reports_split(rl__camp_topo *tp, const uint32_t *index_team, int r, uint32_t rec[][3], int n_rec,
                               json_t **out_plan, rl__errdetail *err) {
    const rl__camp_protocol *p = tp->p;
    int n = p->records, rc = RL_OK;
    int64_t *price = rl__calloc((size_t)n, sizeof *price), *order = rl__calloc((size_t)n, sizeof *order);
    uint8_t *col = rl__calloc((size_t)n, 1);
    uint32_t *team_of = rl__calloc((size_t)n, sizeof *team_of);
    const uint32_t *teams[RL_CAMP_MAX_TEAMS + 1];
    uint32_t n_team[RL_CAMP_MAX_TEAMS + 1];
    json_t *pl = NULL;
    *out_plan = NULL;
    if (!price || !order || !col || !team_of) {
        rc = RL_E_OUT_OF_MEMORY;
        goto done;
    }
    for (int i = 0; i < n; i++) price[i] = rl__tool_order_price(p->data_seed, i + 1), order[i] = i + 1;
    sort_seed_prices = price;
    qsort(order, (size_t)n, sizeof *order, cmp_by_price);
    int t = n < 10 ? n : 10, count = 0, want = (int)(0.30 * n + 0.5);
    for (int i = 0; i < t; i++) col[order[i] - 1] = 1, col[order[n - 1 - i] - 1] = 1;
    for (int i = 0; i < n; i++) count += col[i];
    for (int i = 0; i < n && count < want; i++)
        if (!col[i]) col[i] = 1, count++;
    int rest = n - count, rank = 0;
    for (int i = 0; i < n; i++) team_of[i] = col[i] ? 0 : (uint32_t)(1 + (int64_t)rank++ * n_rec / rest);
    teams[0] = index_team, n_team[0] = (uint32_t)r;
    for (int j = 0; j < n_rec; j++) teams[j + 1] = rec[j], n_team[j + 1] = (uint32_t)r;
    rc = rl__tool_placement_place_runs(tp->url[RL_CAMP_SPLIT], NULL, tp->store[RL_CAMP_SPLIT], "price_idx", index_team,
                                       (uint32_t)r, teams, n_team, (uint32_t)n_rec + 1, team_of, (size_t)n, 0, NULL,
                                       err);
    if (rc) goto done;
    json_t *f = json_object();
    static const int rows[3] = {1, 10, 1000};
    static const char *const rn[3] = {"limit1", "rows10", "rows1000"};
    for (int k = 0; k < 3; k++)
        for (int d = 0; d < 2; d++) {
            char name[48];
            snprintf(name, sizeof name, "split-%s-%s", rn[k], d ? "reverse" : "forward");
            json_object_set_new(f, name, json_real(planned_fraction(order, col, n, rows[k], d)));
        }
    int runs = 1;
    for (int i = 1; i < n; i++) runs += team_of[i] != team_of[i - 1];
    pl = json_pack("{s:s, s:i, s:i, s:i, s:o}", "split",
                   "rows10 forward and reverse, then the lowest order_ids up to 30%, on the index's team; the rest "
                   "evenly over the disjoint teams",
                   "records", n, "colocated_records", count, "record_ranges", runs, "planned_server_disjoint_fraction",
                   f);
    /* The check: the receipt's count of server-disjoint records is the plan's. */
    json_t *show = NULL;
    if ((rc = rl__tool_placement_show(tp->url[RL_CAMP_SPLIT], tp->store[RL_CAMP_SPLIT], "price_idx", NULL, &show, err)))
        goto done;
    json_t *fr = json_object_get(json_object_get(show, "receipt"), "fractions");
    json_int_t got = json_integer_value(json_object_get(fr, "server_disjoint"));
    json_object_set_new(pl, "receipt_server_disjoint", json_integer(got));
    json_decref(show);
    if (got != rest) {
        rl__errdetail_append(err, "placement reports: the receipt counts %lld server-disjoint records, the plan %d",
                             (long long)got, rest);
        rc = RL_E_INTEGRITY_DEFECTS;
    }
done:
    if (rc == RL_E_OUT_OF_MEMORY) rl__errdetail_append(err, "placement reports: out of memory");
    if (!rc) *out_plan = pl;
    else json_decref(pl);
    rl__free(price);
    rl__free(order);
    rl__free(col);
    rl__free(team_of);
    return rc;
}

/* multi: per store, the index price_idx to the index team and the records split evenly over the
 * record teams (rl__tool_placement_place, which returns once every move is done); with placement
 * "reports" the split store as place_reports_split says. single: one storage server holds every
 * shard, nothing to place. */
static int cl_place(rl__camp_topo *tp, rl__errdetail *err) {
    if (tp->t->kind == RL_CAMP_SINGLE) return RL_OK;
    uint32_t index_team[3], rec[RL_CAMP_MAX_TEAMS][3], n_rec[RL_CAMP_MAX_TEAMS];
    const uint32_t *recp[RL_CAMP_MAX_TEAMS];
    int r = tp->t->replication, n = multi_teams(tp->t, index_team, rec);
    if (n < 1) {
        rl__errdetail_append(err, "multi: no record team disjoint from the index team (%d servers, replication %d)",
                             tp->t->storage_servers, r);
        return RL_E_INVALID_ARGUMENT;
    }
    for (int i = 0; i < n; i++) recp[i] = rec[i], n_rec[i] = (uint32_t)r;
    tp->placed_text[0] = 0;
    rl_buf txt;
    rl__buf_init(&txt);
    rl__buf_append_str(&txt, "index ");
    team_text(&txt, index_team, r);
    rl__buf_append_str(&txt, ", records");
    for (int i = 0; i < n; i++) rl__buf_append_str(&txt, " "), team_text(&txt, rec[i], r);
    snprintf(tp->placed_text, sizeof tp->placed_text, "%s", rl__camp_str(&txt));
    rl__buf_release(&txt);
    for (int v = 0; v < RL_CAMP_VARIANTS; v++) {
        if (!tp->loaded[v]) continue;
        if (v == RL_CAMP_SPLIT && !strcmp(tp->t->placement, "reports")) {
            json_t *plan = NULL;
            int rc = place_reports_split(tp, index_team, r, rec, n, &plan, err);
            if (rc) return rc;
            json_object_set_new(plan, "small",
                                json_string("every record on a team disjoint from the index's (fraction 1)"));
            json_decref(tp->place_info);
            tp->place_info = plan;
            continue;
        }
        int rc = rl__tool_placement_place(tp->url[v], NULL, tp->store[v], "price_idx", index_team, (uint32_t)r, recp,
                                          n_rec, (uint32_t)n, 0, NULL, err);
        if (rc) {
            rl__errdetail_append(err, " (placing %s: %s)", tp->store[v], tp->placed_text);
            return rc;
        }
    }
    return RL_OK;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* `pings` PINGs to every process of the cluster, one at a time, through the client's own
 * connections (rl__db_cluster_ping_stats: the path reads take, so an injected delay is on it —
 * what `rl ping` measures). min/p50/p99/max over all of them, and per target. With
 * expect_delay_us > 0 the probe also says whether it shows that one-way delay: "shows_delay" is
 * p50 >= 2 x expect_delay_us (the runner records a failed check when it does not). */
static int cl_probe(rl__camp_topo *tp, int pings, int expect_delay_us, json_t **out, rl__errdetail *err) {
    int n_proc = tp->t->storage_servers + 1, rc = RL_OK;
    uint64_t *ns = rl__calloc((size_t)pings * (size_t)n_proc, sizeof *ns);
    size_t n = 0;
    json_t *targets = json_array();
    rl_db *db = NULL;
    *out = NULL;
    if (!ns || !targets) {
        rc = RL_E_OUT_OF_MEMORY;
        goto done;
    }
    rl_db_options o;
    memset(&o, 0, sizeof o);
    if ((rc = rl_db_open(tp->url[0], &o, &db))) {
        rl__errdetail_append(err, "RTT probe: cannot open %s: %s", tp->url[0], rl_error_name(rc));
        goto done;
    }
    for (uint32_t id = 0; id < (uint32_t)n_proc; id++) {
        uint64_t warm = 0;
        if ((rc = rl__db_cluster_ping(db, id, &warm))) { /* opens the connection: not counted */
            rl__errdetail_append(err, "RTT probe: PING to process %u: %s", id, rl_error_name(rc));
            goto done;
        }
        for (int i = 0; i < pings; i++) {
            if ((rc = rl__db_cluster_ping(db, id, &ns[n]))) {
                rl__errdetail_append(err, "RTT probe: PING to process %u: %s", id, rl_error_name(rc));
                goto done;
            }
            n++;
        }
        qsort(ns + n - (size_t)pings, (size_t)pings, sizeof *ns, cmp_u64);
        const uint64_t *mine = ns + n - (size_t)pings;
        uint64_t p50 = mine[(size_t)(pings - 1) / 2];
        json_array_append_new(targets,
                              json_pack("{s:s, s:i, s:f, s:f}", "role", id ? "storage" : "coordinator", "id", (int)id,
                                        "min_us", (double)mine[0] / 1e3, "p50_us", (double)p50 / 1e3));
    }
    qsort(ns, n, sizeof *ns, cmp_u64);
    double p50_us = (double)ns[n / 2] / 1e3;
    *out = json_pack("{s:b, s:s, s:I, s:f, s:f, s:f, s:f, s:o}", "applicable", 1, "path", "client", "pings",
                     (json_int_t)n, "min_us", (double)ns[0] / 1e3, "p50_us", p50_us, "p99_us",
                     (double)ns[(size_t)((double)(n - 1) * 0.99)] / 1e3, "max_us", (double)ns[n - 1] / 1e3, "targets",
                     targets);
    targets = NULL;
    if (expect_delay_us > 0) { /* the delay check: the round trip crosses it twice */
        json_object_set_new(*out, "expected_min_p50_us", json_real(2.0 * expect_delay_us));
        json_object_set_new(*out, "shows_delay", json_boolean(p50_us >= 2.0 * expect_delay_us));
    }
done:
    if (db) rl_db_close(db);
    json_decref(targets);
    rl__free(ns);
    return rc;
}

/* The store's layout, the shard map's hash, and rl placement show's receipt ("placement": the
 * index and record shards with their teams, the server- and host-disjoint fractions; its
 * read_version left out, so an unchanged cluster gives an equal receipt). */
static int cl_receipt(rl__camp_topo *tp, rl__camp_variant v, json_t **out, rl__errdetail *err) {
    json_t *pl = NULL;
    int rc = rl__camp_layout_receipt(tp->url[v], tp->store[v], out, err);
    if (!rc) rc = rl__camp_shard_receipt(tp->url[v], *out, err);
    if (!rc) rc = rl__tool_placement_show(tp->url[v], tp->store[v], "price_idx", NULL, &pl, err);
    if (!rc) json_object_set(*out, "placement", json_object_get(pl, "receipt"));
    json_decref(pl);
    if (rc && *out) {
        json_decref(*out);
        *out = NULL;
    }
    return rc;
}

static int cl_rtt(rl__camp_topo *tp, int pings, json_t **out, rl__errdetail *err) {
    return cl_probe(tp, pings, tp->t->delay_us, out, err);
}

/* Remove the injected delay (rl__cluster_delay to 0 on every process; a fresh client learns it
 * from the shard map at open) and probe again: "restored" is p50 below 2 x the delay that was
 * injected, i.e. the probe no longer shows it (the reports' restoration check). Without a delay
 * there is nothing to remove. */
static int cl_restore(rl__camp_topo *tp, int pings, json_t **out, rl__errdetail *err) {
    char dir[RL_CAMP_DIR_MAX + 16];
    int set = 0, rc;
    *out = NULL;
    if (!tp->t->delay_us && !tp->t->jitter_us) {
        *out = not_applicable("no delay was injected (delay_us 0)");
        return RL_OK;
    }
    cluster_dir(tp, dir, sizeof dir);
    if ((rc = rl__cluster_delay(dir, 0, 0, &set, err))) return rc;
    if ((rc = cl_probe(tp, pings, 0, out, err))) return rc;
    double p50 = json_number_value(json_object_get(*out, "p50_us"));
    json_object_set_new(*out, "removed_delay_us", json_integer(tp->t->delay_us));
    json_object_set_new(*out, "processes_set", json_integer(set));
    json_object_set_new(*out, "restored", json_boolean(p50 < 2.0 * tp->t->delay_us));
    return RL_OK;
}

static void cl_down(rl__camp_topo *tp) {
    char dir[RL_CAMP_DIR_MAX + 16];
    rl__errdetail err;
    rl__errdetail_init(&err, NULL);
    cluster_dir(tp, dir, sizeof dir);
    rl__cluster_down(dir, NULL, &err); /* stops exactly the recorded pids; nothing else to do on failure */
}

/* ---- fdb (an existing database through fdb:) --------------------------------------------------- */

/* The tuple prefixes the campaign owns in an fdb database: ("bench", NAME), holding the topology's
 * two stores, and ("bench", "control"), the defect controls' scratch stores (rl__camp_defect_controls
 * names them). Packed into out[0] and out[1] (reset first). */
static int fdb_prefixes(const rl__camp_topo *tp, rl_buf out[2]) {
    json_t *a = json_pack("[s, s]", "bench", tp->t->name), *b = json_pack("[s, s]", "bench", "control");
    char *ja = a ? json_dumps(a, JSON_COMPACT) : NULL, *jb = b ? json_dumps(b, JSON_COMPACT) : NULL;
    int rc = ja && jb ? RL_OK : RL_E_OUT_OF_MEMORY;
    rl__buf_reset(&out[0]);
    rl__buf_reset(&out[1]);
    if (!rc) rc = rl__tool_store_prefix(ja, &out[0], NULL);
    if (!rc) rc = rl__tool_store_prefix(jb, &out[1], NULL);
    free(ja);
    free(jb);
    json_decref(a);
    json_decref(b);
    return rc;
}

static int clear_fn(rl_txn *txn, void *ud) {
    rl_buf *pre = ud, end;
    int rc = RL_OK;
    for (int i = 0; i < 2 && !rc; i++) {
        rl__buf_init(&end);
        rl__buf_append(&end, pre[i].data, pre[i].len);
        rl__buf_append_byte(&end, 0xff);
        rc = rl__buf_error(&end);
        if (!rc) rc = rl_txn_clear_range(txn, pre[i].data, pre[i].len, end.data, end.len);
        rl__buf_release(&end);
    }
    return rc;
}

/* Clear the campaign's ranges (fdb_prefixes) in the topology's database, in one transaction. */
static int fdb_clear(rl__camp_topo *tp, rl__errdetail *err) {
    rl_buf pre[2];
    rl_db *db = NULL;
    rl__buf_init(&pre[0]);
    rl__buf_init(&pre[1]);
    int rc = fdb_prefixes(tp, pre);
    if (!rc && !(rc = rl_db_open(tp->url[0], NULL, &db))) rc = rl_db_run(db, clear_fn, pre);
    if (rc)
        rl__errdetail_append(
            err, "clearing the campaign's ranges (\"bench\", \"%s\") and (\"bench\", \"control\") of %s: %s %s",
            tp->t->name, tp->url[0], rl_error_name(rc), rl_last_error_detail());
    rl_db_close(db);
    rl__buf_release(&pre[0]);
    rl__buf_release(&pre[1]);
    return rc;
}

/* Available when FoundationDB's client library loads (the fdb: backend's loader: RL_FDB_LIBRARY or
 * libfdb_c.so, API version 710 or later); one that cannot be loaded makes the topology not
 * available with the loader's message, which names what to install. A database that does not
 * open (a wrong cluster file, a cluster that is down) is up's failure, reported as such. */
static int fdb_available(const rl__camp_topology *t, rl__errdetail *why) {
    rl__errdetail err;
    rl__errdetail_init(&err, NULL);
    int rc = rl__kv_fdb_load(&err);
    if (rc) rl__errdetail_append(why, "%s: %s", t->url, rl__errdetail_get(&err));
    return rc ? RL_E_UNSUPPORTED_OPERATION : RL_OK;
}

/* Both stores in the one database under ("bench", NAME, VARIANT), the defect controls beside them,
 * no SQLite peer, no processes of the campaign's own. The campaign's ranges are cleared first: a
 * previous run's data (or defects) never leaks into this one. tp->info: the backend's status
 * (FoundationDB's library, client and API version, cluster file). */
static int fdb_up(rl__camp_topo *tp, rl__errdetail *err) {
    int rc;
    if ((rc = make_dir(tp->dir, err))) return rc;
    for (int v = 0; v < RL_CAMP_VARIANTS; v++) {
        json_t *a = json_pack("[s, s, s]", "bench", tp->t->name, rl__camp_variant_name((rl__camp_variant)v));
        char *j = a ? json_dumps(a, JSON_COMPACT) : NULL;
        json_decref(a);
        if (!j) return RL_E_OUT_OF_MEMORY;
        snprintf(tp->store[v], sizeof tp->store[v], "%s", j);
        free(j);
        snprintf(tp->url[v], sizeof tp->url[v], "%s", tp->t->url);
        snprintf(tp->query_url[v], sizeof tp->query_url[v], "%s", tp->t->url);
        tp->sqlite[v][0] = 0;
    }
    snprintf(tp->control_url, sizeof tp->control_url, "%s", tp->t->url);
    tp->n_pids = 0;
    if ((rc = fdb_clear(tp, err))) return rc;
    rl_db *db = NULL;
    char *st = NULL;
    if (!(rc = rl_db_open(tp->url[0], NULL, &db)) && !(rc = rl_db_status_json(db, &st)))
        tp->info = json_loads(st, 0, NULL);
    rl_free(st);
    rl_db_close(db);
    if (rc) rl__errdetail_append(err, "%s: status: %s %s", tp->url[0], rl_error_name(rc), rl_last_error_detail());
    return rc;
}

static int fdb_place(rl__camp_topo *tp, rl__errdetail *err) {
    (void)tp, (void)err;
    return RL_OK; /* FoundationDB places (and moves) its shards itself */
}

/* What fdb: can measure: FoundationDB's C API has no ping, so the RTT probe is not applicable. The
 * probe records instead, as "read_latency", the latency of `pings` point reads of absent keys at
 * one read version (a storage server's round trip plus its work and the client library's), which
 * is what a read costs there — not a network round trip. */
static int fdb_rtt(rl__camp_topo *tp, int pings, json_t **out, rl__errdetail *err) {
    rl_db *db = NULL;
    rl_txn *txn = NULL;
    rl_buf pre[2], key;
    uint64_t *ns = rl__calloc((size_t)pings, sizeof *ns);
    int rc;
    *out = NULL;
    rl__buf_init(&pre[0]);
    rl__buf_init(&pre[1]);
    rl__buf_init(&key);
    if (!ns) {
        rc = RL_E_OUT_OF_MEMORY;
        goto done;
    }
    if ((rc = fdb_prefixes(tp, pre)) || (rc = rl_db_open(tp->url[0], NULL, &db)) || (rc = rl_txn_begin(db, &txn)))
        goto done;
    for (int i = -1; i < pings; i++) { /* i = -1: the read version and the first read, not counted */
        rl__buf_reset(&key);
        rl__buf_append(&key, pre[0].data, pre[0].len);
        rl__buf_printf(&key, "\xfeprobe-%d", i + 1); /* after every tuple element: never a key of a store */
        if ((rc = rl__buf_error(&key))) goto done;
        uint64_t t0 = rl__clock_mono_ns();
        rl_future *f = rl_txn_get(txn, key.data, key.len, RL_SNAPSHOT);
        rc = rl_future_wait(f);
        uint64_t t1 = rl__clock_mono_ns();
        rl_future_free(f);
        if (rc) goto done;
        if (i >= 0) ns[i] = t1 - t0;
    }
    qsort(ns, (size_t)pings, sizeof *ns, cmp_u64);
    *out = json_pack("{s:b, s:s, s:{s:s, s:i, s:f, s:f, s:f, s:f}}", "applicable", 0, "reason",
                     "fdb: FoundationDB's C API has no ping; read_latency is a point read's latency, not a round trip",
                     "read_latency", "what", "point reads of absent keys at one read version", "reads", pings, "min_us",
                     (double)ns[0] / 1e3, "p50_us", (double)ns[(pings - 1) / 2] / 1e3, "p99_us",
                     (double)ns[(size_t)((double)(pings - 1) * 0.99)] / 1e3, "max_us", (double)ns[pings - 1] / 1e3);
    if (!*out) rc = RL_E_OUT_OF_MEMORY;
done:
    if (rc) rl__errdetail_append(err, "read probe on %s: %s %s", tp->url[0], rl_error_name(rc), rl_last_error_detail());
    rl_txn_free(txn);
    rl_db_close(db);
    rl__buf_release(&pre[0]);
    rl__buf_release(&pre[1]);
    rl__buf_release(&key);
    rl__free(ns);
    return rc;
}

/* The store's layout read through fdb: (the data did not change); no placement part: FoundationDB
 * keeps its shard map to itself (and moves shards on its own). */
static int fdb_receipt(rl__camp_topo *tp, rl__camp_variant v, json_t **out, rl__errdetail *err) {
    int rc = rl__camp_layout_receipt(tp->url[v], tp->store[v], out, err);
    if (!rc)
        json_object_set_new(
            *out, "placement",
            not_applicable("fdb: FoundationDB places its shards itself; no shard map through its C API"));
    return rc;
}

static int fdb_restore(rl__camp_topo *tp, int pings, json_t **out, rl__errdetail *err) {
    (void)tp, (void)pings, (void)err;
    *out = not_applicable("fdb: no delay was injected (the campaign does not control that network)");
    return RL_OK;
}

/* The campaign's ranges are cleared again unless keep_data; the database itself is the user's. */
static void fdb_down(rl__camp_topo *tp) {
    rl__errdetail err;
    if (tp->p->keep_data) return;
    rl__errdetail_init(&err, NULL);
    (void)fdb_clear(tp, &err); /* nothing to do on failure: the next run clears them first */
}

static const rl__camp_topo_vtable embedded_ops = {"embedded", emb_available, emb_up,      emb_place,
                                                  emb_rtt,    emb_receipt,   emb_restore, emb_down};
static const rl__camp_topo_vtable single_ops = {"single", cl_available, cl_up,      cl_place,
                                                cl_rtt,   cl_receipt,   cl_restore, cl_down};
static const rl__camp_topo_vtable multi_ops = {"multi", cl_available, cl_up,      cl_place,
                                               cl_rtt,  cl_receipt,   cl_restore, cl_down};

static const rl__camp_topo_vtable fdb_ops = {"fdb",   fdb_available, fdb_up,      fdb_place,
                                             fdb_rtt, fdb_receipt,   fdb_restore, fdb_down};

const rl__camp_topo_vtable *rl__camp_topo_ops(rl__camp_topo_kind k) {
    return k == RL_CAMP_SINGLE  ? &single_ops
           : k == RL_CAMP_MULTI ? &multi_ops
           : k == RL_CAMP_FDB   ? &fdb_ops
                                : &embedded_ops;
}
