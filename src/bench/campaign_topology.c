/* campaign_topology.c — the campaign's topologies behind one table of hooks (campaign_int.h).
 *
 * embedded: each variant in its own file: database under DIR/data/NAME/ (small/, split/), so a
 *   worker opens only the data its case reads; the SQLite peer beside it (small.sqlite,
 *   split.sqlite); the defect controls' scratch database in control/. No network: the RTT probe and
 *   the restoration are recorded as not applicable. The placement receipt is the layout of the
 *   case's store (rl__camp_layout_receipt).
 * single, multi: not available until the cluster lands (rlkvd, `cluster:` and rl cluster up/down,
 *   issues 14 and 15). Their hooks are stubs that say so; campaign_int.h says what each must do.
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "bench/campaign_int.h"

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

static int cl_available(const rl_camp_topology *t, rl_buf *why) {
    rl__buf_printf(why, "the %s topology needs the cluster (rlkvd, the cluster: client, rl cluster up/down and the "
                        "placement admin operations: issues 14 and 15), which this build does not have yet",
                   kind_names[t->kind]);
    return RL_E_UNSUPPORTED_OPERATION;
}

static int cl_up(rl_camp_topo *tp, rl_buf *msg) { return cl_available(tp->t, msg); }
static int cl_place(rl_camp_topo *tp, rl_buf *msg) { return cl_available(tp->t, msg); }
static int cl_rtt(rl_camp_topo *tp, int pings, json_t **out, rl_buf *msg) {
    (void)pings;
    *out = NULL;
    return cl_available(tp->t, msg);
}
static int cl_receipt(rl_camp_topo *tp, rl_camp_variant v, json_t **out, rl_buf *msg) {
    (void)v;
    *out = NULL;
    return cl_available(tp->t, msg);
}
static void cl_down(rl_camp_topo *tp) { (void)tp; }

static const rl_camp_topo_ops embedded_ops = {"embedded", emb_available, emb_up, emb_place, emb_rtt,
                                              emb_receipt, emb_restore, emb_down};
static const rl_camp_topo_ops single_ops = {"single", cl_available, cl_up, cl_place, cl_rtt, cl_receipt, cl_rtt, cl_down};
static const rl_camp_topo_ops multi_ops = {"multi", cl_available, cl_up, cl_place, cl_rtt, cl_receipt, cl_rtt, cl_down};

const rl_camp_topo_ops *rl__camp_topo_ops(rl_camp_topo_kind k) {
    return k == RL_CAMP_SINGLE ? &single_ops : k == RL_CAMP_MULTI ? &multi_ops : &embedded_ops;
}
