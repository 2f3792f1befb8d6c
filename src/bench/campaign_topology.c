/* campaign_topology.c — the campaign's topologies behind one table of hooks (campaign_int.h).
 *
 * embedded: each variant in its own file: database under DIR/data/NAME/ (small/, split/), so a
 *   worker opens only the data its case reads; the SQLite peer beside it (small.sqlite,
 *   split.sqlite); the defect controls' scratch database in control/. No network: the RTT probe and
 *   the restoration are recorded as not applicable. The placement receipt is the layout of the
 *   case's store (rl__camp_layout_receipt).
 * single: a local cluster (rl__cluster_up of src/server/cluster_admin.h: one coordinator and the
 *   protocol's storage servers on 127.0.0.1, in DIR/data/NAME/cluster, the processes dying with the
 *   campaign), both stores in it under ("bench", "small") and ("bench", "split"), no SQLite peer.
 *   The RTT probe is `pings` PINGs to every process through the client's connections (rl ping's
 *   path, rl__db_cluster_ping_stats' PING); the receipt is the
 *   store's layout read through the cluster plus a hash of the shard map (\xff/keyServers/) and the
 *   server list (\xff/serverList/). Available with delay_us 0 only: injected delay is issue 14.
 * multi: not available until host labels, teams, placement and delay injection land (issue 14);
 *   campaign_int.h says what each hook must then do.
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
#include "kv/cluster/cluster.h"
#include "net/proto.h"
#include "server/cluster_admin.h"

static const char *const kind_names[] = {"embedded", "single", "multi"};

const char *rl__camp_topo_kind_name(rl_camp_topo_kind k) { return (unsigned)k < 3 ? kind_names[k] : "unknown"; }

/* mkdir path (0700); an existing directory is fine. */
static int make_dir(const char *path, rl_buf *msg) {
    if (mkdir(path, 0700) == 0 || errno == EEXIST) return RL_OK;
    rl__buf_printf(msg, "cannot create %s: %s", path, strerror(errno));
    return errno == ENOSPC ? RL_E_NO_SPACE : RL_E_IO_ERROR;
}

static json_t *not_applicable(const char *why) { return json_pack("{s:b, s:s}", "applicable", 0, "reason", why); }

/* ---- embedded ---------------------------------------------------------------------------------- */

static int emb_available(const rl_camp_topology *t, rl_buf *why) {
    (void)t;
    (void)why;
    return RL_OK;
}

static int emb_up(rl_camp_topo *tp, rl_buf *msg) {
    char path[RL_CAMP_DIR_MAX + 32];
    int rc;
    if ((rc = make_dir(tp->dir, msg))) return rc;
    for (int v = 0; v < RL_CAMP_VARIANTS; v++) {
        const char *name = rl__camp_variant_name((rl_camp_variant)v);
        snprintf(path, sizeof path, "%s/%s", tp->dir, name);
        if ((rc = make_dir(path, msg))) return rc;
        snprintf(tp->url[v], sizeof tp->url[v], "file:%s", path);
        snprintf(tp->store[v], sizeof tp->store[v], "[\"bench\",\"%s\"]", name);
        snprintf(tp->sqlite[v], sizeof tp->sqlite[v], "%s/%s.sqlite", tp->dir, name);
    }
    snprintf(path, sizeof path, "%s/control", tp->dir);
    if ((rc = make_dir(path, msg))) return rc;
    snprintf(tp->control_url, sizeof tp->control_url, "file:%s", path);
    tp->n_pids = 0;
    return RL_OK;
}

static int emb_place(rl_camp_topo *tp, rl_buf *msg) {
    (void)tp;
    (void)msg;
    return RL_OK;
}

static int emb_rtt(rl_camp_topo *tp, int pings, json_t **out, rl_buf *msg) {
    (void)tp, (void)pings, (void)msg;
    *out = not_applicable("embedded: no network between the client and the data");
    return RL_OK;
}

static int emb_receipt(rl_camp_topo *tp, rl_camp_variant v, json_t **out, rl_buf *msg) {
    return rl__camp_layout_receipt(tp->url[v], tp->store[v], out, msg);
}

static int emb_restore(rl_camp_topo *tp, int pings, json_t **out, rl_buf *msg) {
    (void)tp, (void)pings, (void)msg;
    *out = not_applicable("embedded: no injected delay to remove");
    return RL_OK;
}

static void emb_down(rl_camp_topo *tp) { (void)tp; }

/* ---- single, multi (the cluster) --------------------------------------------------------------- */

/* The cluster's directory under the topology's. */
static void cluster_dir(const rl_camp_topo *tp, char *out, size_t cap) { snprintf(out, cap, "%s/cluster", tp->dir); }

static int cl_available(const rl_camp_topology *t, rl_buf *why) {
    rl_buf self;
    char path[RL_CAMP_PATH_MAX + 16];
    if (t->kind == RL_CAMP_MULTI) {
        rl__buf_append_str(why, "the multi topology needs host labels, replication teams, explicit placement and "
                                "injected delay (the cluster, part 2: issue 14), which this build does not have yet");
        return RL_E_UNSUPPORTED_OPERATION;
    }
    if (t->delay_us || t->jitter_us) {
        rl__buf_printf(why, "an injected delay (%d us one way) needs the cluster's delay injection (issue 14), which "
                            "this build does not have yet; a single topology with delay_us 0 runs now",
                       t->delay_us);
        return RL_E_UNSUPPORTED_OPERATION;
    }
    if (!strcmp(t->engine, "ssd")) {
        rl__buf_append_str(why, "the ssd engine (issue 12) is not built yet");
        return RL_E_UNSUPPORTED_OPERATION;
    }
    rl__buf_init(&self);
    int rc = rl__camp_self_exe(&self);
    if (!rc) {
        char *slash = strrchr((char *)self.data, '/');
        if (slash) *slash = 0;
        snprintf(path, sizeof path, "%s/rlkvd", rl__camp_str(&self));
        if (access(path, X_OK) != 0) {
            rl__buf_printf(why, "%s is not built (the cluster's server)", path);
            rc = RL_E_UNSUPPORTED_OPERATION;
        }
    }
    rl__buf_release(&self);
    return rc;
}

static int cl_up(rl_camp_topo *tp, rl_buf *msg) {
    char dir[RL_CAMP_DIR_MAX + 16];
    rl_cluster_up_opts o;
    int rc;
    if ((rc = make_dir(tp->dir, msg))) return rc;
    cluster_dir(tp, dir, sizeof dir);
    memset(&o, 0, sizeof o);
    o.n_storage = tp->t->storage_servers;
    o.flags = RL_CLUSTER_DIE_WITH_PARENT; /* never outlive the campaign, even if it is killed */
    if ((rc = rl__cluster_up(dir, &o, msg))) return rc;
    for (int v = 0; v < RL_CAMP_VARIANTS; v++) {
        snprintf(tp->url[v], sizeof tp->url[v], "cluster:%s/reclayer.cluster", dir);
        snprintf(tp->store[v], sizeof tp->store[v], "[\"bench\",\"%s\"]", rl__camp_variant_name((rl_camp_variant)v));
        tp->sqlite[v][0] = 0; /* the SQLite peer is an embedded arm */
    }
    snprintf(tp->control_url, sizeof tp->control_url, "%s", tp->url[0]);
    tp->n_pids = 0;
    for (uint32_t id = 0; id <= (uint32_t)o.n_storage && tp->n_pids < RL_CAMP_MAX_OWNED_PIDS; id++) {
        int pid = 0;
        if ((rc = rl__cluster_pid(dir, id, &pid, NULL, msg))) return rc;
        if (pid > 0) tp->pids[tp->n_pids++] = pid;
    }
    return RL_OK;
}

static int cl_place(rl_camp_topo *tp, rl_buf *msg) {
    (void)msg;
    /* single: one storage server holds every shard; nothing to place. multi: split at the stores'
     * index and records prefixes and assign the teams (issue 14's admin operations). */
    return tp->t->kind == RL_CAMP_SINGLE ? RL_OK : cl_available(tp->t, msg);
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* `pings` PINGs to every process of the cluster, one at a time, through the client's own
 * connections (rl__db_cluster_ping_stats: the path reads take, so an injected delay is on it —
 * what `rl ping` measures). min/p50/p99/max over all of them, and per target. */
static int cl_rtt(rl_camp_topo *tp, int pings, json_t **out, rl_buf *msg) {
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
        rl__buf_printf(msg, "RTT probe: cannot open %s: %s", tp->url[0], rl_error_name(rc));
        goto done;
    }
    for (uint32_t id = 0; id < (uint32_t)n_proc; id++) {
        uint64_t warm = 0;
        if ((rc = rl__db_cluster_ping(db, id, &warm))) { /* opens the connection: not counted */
            rl__buf_printf(msg, "RTT probe: PING to process %u: %s", id, rl_error_name(rc));
            goto done;
        }
        for (int i = 0; i < pings; i++) {
            if ((rc = rl__db_cluster_ping(db, id, &ns[n]))) {
                rl__buf_printf(msg, "RTT probe: PING to process %u: %s", id, rl_error_name(rc));
                goto done;
            }
            n++;
        }
        qsort(ns + n - (size_t)pings, (size_t)pings, sizeof *ns, cmp_u64);
        const uint64_t *mine = ns + n - (size_t)pings;
        uint64_t p50 = mine[(size_t)(pings - 1) / 2];
        json_array_append_new(targets, json_pack("{s:s, s:i, s:f, s:f}", "role", id ? "storage" : "coordinator", "id",
                                                 (int)id, "min_us", (double)mine[0] / 1e3, "p50_us",
                                                 (double)p50 / 1e3));
    }
    qsort(ns, n, sizeof *ns, cmp_u64);
    *out = json_pack("{s:b, s:s, s:I, s:f, s:f, s:f, s:f, s:o}", "applicable", 1, "path", "client", "pings",
                     (json_int_t)n, "min_us", (double)ns[0] / 1e3, "p50_us", (double)ns[n / 2] / 1e3, "p99_us",
                     (double)ns[(size_t)((double)(n - 1) * 0.99)] / 1e3, "max_us", (double)ns[n - 1] / 1e3, "targets",
                     targets);
    targets = NULL;
done:
    if (db) rl_db_close(db);
    json_decref(targets);
    rl__free(ns);
    return rc;
}

static int cl_receipt(rl_camp_topo *tp, rl_camp_variant v, json_t **out, rl_buf *msg) {
    int rc = rl__camp_layout_receipt(tp->url[v], tp->store[v], out, msg);
    if (!rc) rc = rl__camp_shard_receipt(tp->url[v], *out, msg);
    return rc;
}

static int cl_restore(rl_camp_topo *tp, int pings, json_t **out, rl_buf *msg) {
    (void)tp, (void)pings, (void)msg;
    /* With delay injection (issue 14): set the delay to 0 on every link, then cl_rtt. */
    *out = not_applicable("no delay was injected (delay_us 0)");
    return RL_OK;
}

static void cl_down(rl_camp_topo *tp) {
    char dir[RL_CAMP_DIR_MAX + 16];
    rl_buf msg;
    rl__buf_init(&msg);
    cluster_dir(tp, dir, sizeof dir);
    rl__cluster_down(dir, NULL, &msg); /* stops exactly the recorded pids; nothing else to do on failure */
    rl__buf_release(&msg);
}

static const rl_camp_topo_ops embedded_ops = {"embedded", emb_available, emb_up, emb_place, emb_rtt,
                                              emb_receipt, emb_restore, emb_down};
static const rl_camp_topo_ops single_ops = {"single", cl_available, cl_up, cl_place, cl_rtt, cl_receipt, cl_restore, cl_down};
static const rl_camp_topo_ops multi_ops = {"multi", cl_available, cl_up, cl_place, cl_rtt, cl_receipt, cl_restore, cl_down};

const rl_camp_topo_ops *rl__camp_topo_ops(rl_camp_topo_kind k) {
    return k == RL_CAMP_SINGLE ? &single_ops : k == RL_CAMP_MULTI ? &multi_ops : &embedded_ops;
}
