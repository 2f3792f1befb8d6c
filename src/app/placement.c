/* placement.c — `rl placement`'s library: SPLIT_SHARD / ASSIGN_SHARD through an admin connection
 * to the coordinator, the shard map from the system keyspace, the disjoint fractions and the
 * placement receipt. See placement.h; docs/design.md §8.6.
 */
#include "app/placement.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/bytes.h"
#include "base/clock.h"
#include "kv/cluster/clusterfile.h"
#include "reclayer/error.h"
#include "app/cluster_admin.h"
#include "server/keyfile.h"
#include "tuple/tuple.h"

#define KEYSERVERS_LEN 13 /* "\xff/keyServers/" */
#define SERVERLIST_LEN 13 /* "\xff/serverList/" */

/* ---- Admin operations ---------------------------------------------------------------------- */

int rl__placement_coordinator(const char *db, char ip[16], uint16_t *port, rl__errdetail *err) {
    if (!db || !*db) {
        rl__errdetail_append(err, "--db needs a cluster file URL (cluster:FILE)");
        return RL_E_INVALID_ARGUMENT;
    }
    const char *path = db;
    if (!strncmp(db, "cluster:", 8)) path = db + 8;
    else if (strchr(db, ':') && (!strncmp(db, "mem:", 4) || !strncmp(db, "file:", 5) || !strncmp(db, "fdb:", 4))) {
        rl__errdetail_append(err, "placement needs a cluster (--db cluster:FILE), not %s", db);
        return RL_E_INVALID_ARGUMENT;
    }
    rl__cluster_file cf;
    int rc = rl__cluster_file_read(path, &cf, err);
    if (rc != RL_OK) return rc;
    memcpy(ip, cf.ip, sizeof cf.ip);
    *port = cf.port;
    return RL_OK;
}

static int call_retry_auth(const char *db, const rl__net_auth *auth, const rl__msg *req, rl__msg *reply, int timeout_ms,
                           rl__admin_conn **conn, rl__errdetail *err);

/* The key file of db's cluster into *out: key_file, or cluster.key beside db's cluster file. */
static int read_key(const char *db, const char *key_file, rl__keyfile *out, rl__errdetail *err) {
    char path[4096];
    const char *cf = !strncmp(db, "cluster:", 8) ? db + 8 : db;
    if (!key_file) {
        if (rl__keyfile_next_to(cf, path, sizeof path) != RL_OK) {
            rl__errdetail_append(err, "the cluster file's path is too long");
            return RL_E_INVALID_ARGUMENT;
        }
        key_file = path;
    }
    return rl__keyfile_read(key_file, out, err);
}

/* Open an admin connection to the coordinator of db. (The one call site of
 * rl__admin_conn_open: the address is the cluster file's, the port too.) */
static int open_admin(const char *db, const rl__net_auth *auth, int timeout_ms, rl__admin_conn **out,
                      rl__errdetail *err) {
    char ip[16];
    uint16_t port;
    int rc = rl__placement_coordinator(db, ip, &port, err);
    if (rc != RL_OK) return rc;
    return rl__admin_conn_open_at(ip, port, auth, timeout_ms, out, err);
}

/* Send req and wait for its reply, reconnecting after a lost connection until the deadline
 * (the requests are idempotent). */
static int call_retry(const char *db, const char *key_file, const rl__msg *req, rl__msg *reply, int timeout_ms,
                      rl__admin_conn **conn, rl__errdetail *err) {
    char ip[16];
    uint16_t port;
    int rc = rl__placement_coordinator(db, ip, &port, err); /* a URL of another kind: said before the key */
    if (rc != RL_OK) return rc;
    rl__keyfile kf;
    if ((rc = read_key(db, key_file, &kf, err)) != RL_OK) return rc;
    rc = call_retry_auth(db, &kf.auth, req, reply, timeout_ms, conn, err);
    memset(&kf, 0, sizeof kf);
    return rc;
}

static int call_retry_auth(const char *db, const rl__net_auth *auth, const rl__msg *req, rl__msg *reply, int timeout_ms,
                           rl__admin_conn **conn, rl__errdetail *err) {
    uint64_t deadline = rl__clock_mono_ns() + (uint64_t)timeout_ms * 1000000ull;
    int rc = RL_E_TIMED_OUT;
    for (int attempt = 0;; attempt++) {
        uint64_t now = rl__clock_mono_ns();
        if (now >= deadline) break;
        int left = (int)((deadline - now) / 1000000ull) + 1;
        size_t mark = rl__errdetail_len(err);
        if (!*conn && (rc = open_admin(db, auth, left < 5000 ? left : 5000, conn, err)) != RL_OK) {
            if (rc != RL_E_CONNECTION_FAILED && rc != RL_E_TIMED_OUT) return rc;
        } else {
            rc = rl__admin_conn_call(*conn, req, reply, left, err);
            if (rc != RL_E_CONNECTION_FAILED) return rc;
            rl__admin_conn_close(*conn);
            *conn = NULL;
        }
        /* The coordinator restarts: try again shortly. */
        rl__errdetail_truncate(err, mark);
        struct timespec ts = {0, 100000000L};
        nanosleep(&ts, NULL);
    }
    rl__errdetail_append(err, "%s: no answer from the coordinator in time", rl__msg_type_name(req->type));
    return rc == RL_E_CONNECTION_FAILED ? RL_E_CONNECTION_FAILED : RL_E_TIMED_OUT;
}

int rl__placement_split(const char *db, const char *key_file, const uint8_t *key, size_t key_len, int timeout_ms,
                        rl__version *out_version, int *out_split, rl__errdetail *err) {
    static const uint8_t ff = 0xff;
    if (key_len == 0 || rl__bytes_cmp(key, (uint32_t)key_len, &ff, 1) >= 0 || key_len > RL_PROTO_MAX_KEY) {
        rl__errdetail_append(err, "the split key must be above \"\" and below \\xff");
        return RL_E_INVALID_ARGUMENT;
    }
    if (timeout_ms <= 0) timeout_ms = RL_PLACEMENT_DEFAULT_TIMEOUT_MS;
    rl__msg req, rep;
    memset(&req, 0, sizeof req);
    req.type = RL_MSG_SPLIT_SHARD;
    req.u.split_shard_req.key = key;
    req.u.split_shard_req.key_len = (uint32_t)key_len;
    rl__admin_conn *c = NULL;
    int rc = call_retry(db, key_file, &req, &rep, timeout_ms, &c, err);
    if (rc == RL_OK) {
        if (out_version) *out_version = rep.u.split_shard_reply.version;
        if (out_split) *out_split = rep.u.split_shard_reply.split;
    }
    rl__admin_conn_close(c);
    return rc;
}

int rl__placement_assign(const char *db, const char *key_file, const uint8_t *begin, size_t begin_len,
                         const uint8_t *end, size_t end_len, const uint32_t *team, uint32_t n_team, int timeout_ms,
                         rl__version *out_version, uint32_t *out_moved, rl__errdetail *err) {
    static const uint8_t ff = 0xff;
    if (rl__bytes_cmp(begin, (uint32_t)begin_len, end, (uint32_t)end_len) >= 0) {
        rl__errdetail_append(err, "--begin must be below --end");
        return RL_E_INVALID_ARGUMENT;
    }
    if (rl__bytes_cmp(end, (uint32_t)end_len, &ff, 1) > 0 || end_len > RL_PROTO_MAX_KEY) {
        rl__errdetail_append(err, "--end must be at or below \\xff (the system keyspace is the "
                                  "coordinator's)");
        return RL_E_INVALID_ARGUMENT;
    }
    if (n_team == 0 || n_team > RL_PROTO_MAX_TEAM) {
        rl__errdetail_append(err, "--team must list 1 to %d storage ids", RL_PROTO_MAX_TEAM);
        return RL_E_INVALID_ARGUMENT;
    }
    for (uint32_t i = 0; i < n_team; i++)
        for (uint32_t j = 0; j < i; j++)
            if (team[i] == team[j]) {
                rl__errdetail_append(err, "--team lists storage id %u twice", team[i]);
                return RL_E_INVALID_ARGUMENT;
            }
    if (timeout_ms <= 0) timeout_ms = RL_PLACEMENT_DEFAULT_TIMEOUT_MS;
    rl__msg req, rep;
    memset(&req, 0, sizeof req);
    req.type = RL_MSG_ASSIGN_SHARD;
    req.u.assign_shard_req.range = (rl__keyrange){begin, (uint32_t)begin_len, end, (uint32_t)end_len};
    req.u.assign_shard_req.team = team;
    req.u.assign_shard_req.n_team = n_team;
    req.u.assign_shard_req.timeout_ms = (uint32_t)timeout_ms;
    rl__admin_conn *c = NULL;
    int rc = call_retry(db, key_file, &req, &rep, timeout_ms + 2000, &c, err);
    if (rc == RL_OK) {
        if (out_version) *out_version = rep.u.assign_shard_reply.version;
        if (out_moved) *out_moved = rep.u.assign_shard_reply.moved;
    }
    rl__admin_conn_close(c);
    return rc;
}

/* ---- The shard map --------------------------------------------------------------------------- */

void rl__pl_map_free(rl__pl_map *m) {
    if (!m) return;
    for (uint32_t i = 0; i < m->n_shards; i++) {
        rl__free(m->shards[i].begin);
        rl__free(m->shards[i].end);
    }
    rl__free(m->shards);
    rl__free(m->servers);
    memset(m, 0, sizeof *m);
}

static uint8_t *dup_bytes(const void *p, size_t n) {
    uint8_t *q = rl__malloc(n ? n : 1);
    if (q && n) memcpy(q, p, n);
    return q;
}

int rl__pl_map_parse(const rl_keyvalue *ks, int n_ks, const rl_keyvalue *sl, int n_sl, rl__pl_map *out,
                     rl__errdetail *err) {
    static const uint8_t ff = 0xff;
    memset(out, 0, sizeof *out);
    out->shards = rl__calloc((size_t)n_ks + 1, sizeof *out->shards);
    out->servers = rl__calloc((size_t)n_sl + 1, sizeof *out->servers);
    if (!out->shards || !out->servers) goto oom;
    for (int i = 0; i < n_ks; i++) {
        const uint8_t *b = ks[i].key + KEYSERVERS_LEN;
        uint32_t bl = ks[i].key_len - KEYSERVERS_LEN;
        if (ks[i].key_len < KEYSERVERS_LEN) goto corrupt;
        if (rl__bytes_cmp(b, bl, &ff, 1) >= 0) break; /* the system shard */
        const uint8_t *e = &ff;
        uint32_t el = 1;
        if (i + 1 < n_ks) e = ks[i + 1].key + KEYSERVERS_LEN, el = ks[i + 1].key_len - KEYSERVERS_LEN;
        if (rl__bytes_cmp(e, el, &ff, 1) > 0) e = &ff, el = 1;
        rl__pl_shard *s = &out->shards[out->n_shards++];
        s->begin = dup_bytes(b, bl);
        s->end = dup_bytes(e, el);
        if (!s->begin || !s->end) goto oom;
        s->begin_len = bl;
        s->end_len = el;
        rl__tuple_iter it;
        rl__tuple_elem el2;
        int rc;
        rl__tuple_iter_init(&it, ks[i].value, ks[i].value_len);
        while ((rc = rl__tuple_iter_next(&it, &el2)) == RL_OK) {
            if (el2.type != RL_TT_INT || !el2.fits_i64 || el2.i < 0 || el2.i > (int64_t)UINT32_MAX ||
                s->n_team >= RL_PROTO_MAX_TEAM)
                goto corrupt;
            s->team[s->n_team++] = (uint32_t)el2.i;
        }
        if (rc != RL_E_NOT_FOUND || s->n_team == 0) goto corrupt;
    }
    if (out->n_shards == 0 || out->shards[0].begin_len != 0) goto corrupt;
    for (int i = 0; i < n_sl; i++) {
        if (sl[i].key_len != SERVERLIST_LEN + 4) continue;
        const uint8_t *ik = sl[i].key + SERVERLIST_LEN;
        uint32_t id = (uint32_t)ik[0] << 24 | (uint32_t)ik[1] << 16 | (uint32_t)ik[2] << 8 | ik[3];
        if (id == 0) continue; /* the coordinator */
        rl__tuple_elem e[3];
        int ok = 1;
        for (size_t j = 0; j < 3 && ok; j++) ok = rl__tuple_get(sl[i].value, sl[i].value_len, j, &e[j]) == RL_OK;
        if (!ok || e[0].type != RL_TT_STRING || e[0].payload_len > 15 || e[1].type != RL_TT_INT ||
            (e[2].type != RL_TT_STRING && e[2].type != RL_TT_BYTES))
            continue;
        rl__pl_server_entry *s = &out->servers[out->n_servers++];
        s->id = id;
        memcpy(s->address, e[0].payload, e[0].payload_len);
        s->port = (uint16_t)e[1].i;
        rl_buf h;
        rl__buf_init(&h);
        rl__tuple_elem_unescape(&e[2], &h);
        size_t hl = h.len < RL_PROTO_MAX_STRING ? h.len : RL_PROTO_MAX_STRING;
        if (hl) memcpy(s->host, h.data, hl);
        s->host[hl] = 0;
        rl__buf_release(&h);
    }
    return RL_OK;
corrupt:
    rl__errdetail_append(err, "the shard map in the system keyspace is not well formed");
    rl__pl_map_free(out);
    return RL_E_CORRUPT_DATA;
oom:
    rl__pl_map_free(out);
    rl__errdetail_append(err, "out of memory");
    return RL_E_OUT_OF_MEMORY;
}

const rl__pl_shard *rl__pl_shard_of(const rl__pl_map *m, const uint8_t *key, size_t len) {
    uint32_t lo = 0, hi = m->n_shards;
    while (lo < hi) { /* the first shard whose end > key */
        uint32_t mid = lo + (hi - lo) / 2;
        if (rl__bytes_cmp(m->shards[mid].end, m->shards[mid].end_len, key, (uint32_t)len) <= 0) lo = mid + 1;
        else hi = mid;
    }
    if (lo >= m->n_shards || rl__bytes_cmp(m->shards[lo].begin, m->shards[lo].begin_len, key, (uint32_t)len) > 0)
        return NULL;
    return &m->shards[lo];
}

const rl__pl_server_entry *rl__pl_server(const rl__pl_map *m, uint32_t id) {
    for (uint32_t i = 0; i < m->n_servers; i++)
        if (m->servers[i].id == id) return &m->servers[i];
    return NULL;
}

/* ---- Fractions ------------------------------------------------------------------------------- */

/* 1 if teams a and b share no id. */
static int ids_disjoint(const rl__pl_shard *a, const rl__pl_shard *b) {
    for (uint32_t i = 0; i < a->n_team; i++)
        for (uint32_t j = 0; j < b->n_team; j++)
            if (a->team[i] == b->team[j]) return 0;
    return 1;
}

/* The host label of id ("id:N" for a server the list does not name) into buf. */
static const char *host_of(const rl__pl_map *m, uint32_t id, char *buf, size_t cap) {
    const rl__pl_server_entry *s = rl__pl_server(m, id);
    if (s && s->host[0]) return s->host;
    snprintf(buf, cap, "id:%u", id);
    return buf;
}

/* 1 if teams a and b share no host. */
static int hosts_disjoint(const rl__pl_map *m, const rl__pl_shard *a, const rl__pl_shard *b) {
    char x[32], y[32];
    for (uint32_t i = 0; i < a->n_team; i++)
        for (uint32_t j = 0; j < b->n_team; j++)
            if (!strcmp(host_of(m, a->team[i], x, sizeof x), host_of(m, b->team[j], y, sizeof y))) return 0;
    return 1;
}

void rl__pl_fractions(const rl__pl_map *m, const rl__pl_pair *pairs, size_t n, rl__pl_fraction_counts *out) {
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < n; i++) {
        const rl__pl_shard *r = rl__pl_shard_of(m, pairs[i].record_key, pairs[i].record_len);
        const rl__pl_shard *x = rl__pl_shard_of(m, pairs[i].index_key, pairs[i].index_len);
        if (!r || !x) continue;
        out->records++;
        out->server_disjoint += (uint64_t)ids_disjoint(r, x);
        out->host_disjoint += (uint64_t)hosts_disjoint(m, r, x);
    }
    if (out->records) {
        out->server_fraction = (double)out->server_disjoint / (double)out->records;
        out->host_fraction = (double)out->host_disjoint / (double)out->records;
    }
}

size_t rl__pl_split_points(size_t n, size_t k, size_t *points) {
    size_t np = 0;
    for (size_t i = 0; k > 1 && i + 1 < k; i++) {
        size_t p = (i + 1) * n / k;
        if (p == 0 || p >= n || (np && points[np - 1] == p)) continue;
        points[np++] = p;
    }
    return np;
}

/* ---- The receipt ----------------------------------------------------------------------------- */

static json_t *printable(const uint8_t *p, size_t n) {
    rl_buf b;
    rl__buf_init(&b);
    rl__bytes_printable(&b, p, n);
    json_t *s = rl__buf_error(&b) ? NULL : json_stringn(b.data ? (const char *)b.data : "", b.len);
    rl__buf_release(&b);
    return s;
}

static json_t *team_json(const rl__pl_map *m, const rl__pl_shard *s) {
    json_t *t = json_array();
    for (uint32_t i = 0; t && i < s->n_team; i++) {
        const rl__pl_server_entry *sv = rl__pl_server(m, s->team[i]);
        json_array_append_new(t, json_pack("{s:I,s:s,s:i,s:s}", "id", (json_int_t)s->team[i], "address",
                                           sv ? sv->address : "", "port", sv ? (int)sv->port : 0, "host",
                                           sv ? sv->host : ""));
    }
    return t;
}

/* The shards meeting [b, e), with the records counted per shard when pairs is not NULL. */
static json_t *part_json(const rl__pl_map *m, const uint8_t *b, size_t bl, const uint8_t *e, size_t el,
                         const rl__pl_pair *pairs, size_t n) {
    json_t *o = json_object(), *arr = json_array();
    if (!o || !arr) {
        json_decref(o);
        json_decref(arr);
        return NULL;
    }
    json_object_set_new(o, "begin", printable(b, bl));
    json_object_set_new(o, "end", printable(e, el));
    size_t pi = 0;
    for (uint32_t i = 0; i < m->n_shards; i++) {
        const rl__pl_shard *s = &m->shards[i];
        if (rl__bytes_cmp(s->end, s->end_len, b, (uint32_t)bl) <= 0 ||
            rl__bytes_cmp(s->begin, s->begin_len, e, (uint32_t)el) >= 0)
            continue;
        json_t *j = json_object();
        json_object_set_new(j, "begin", printable(s->begin, s->begin_len));
        json_object_set_new(j, "end", printable(s->end, s->end_len));
        json_object_set_new(j, "team", team_json(m, s));
        if (pairs) {
            uint64_t cnt = 0;
            while (pi < n &&
                   rl__bytes_cmp(pairs[pi].record_key, (uint32_t)pairs[pi].record_len, s->begin, s->begin_len) < 0)
                pi++;
            while (pi < n &&
                   rl__bytes_cmp(pairs[pi].record_key, (uint32_t)pairs[pi].record_len, s->end, s->end_len) < 0)
                pi++, cnt++;
            json_object_set_new(j, "records", json_integer((json_int_t)cnt));
        }
        json_array_append_new(arr, j);
    }
    json_object_set_new(o, "shards", arr);
    return o;
}

json_t *rl__pl_receipt(const rl__pl_map *m, const uint8_t *idx_b, size_t idx_bl, const uint8_t *idx_e, size_t idx_el,
                       const uint8_t *rec_b, size_t rec_bl, const uint8_t *rec_e, size_t rec_el,
                       const rl__pl_pair *pairs, size_t n) {
    rl__pl_fraction_counts f;
    rl__pl_fractions(m, pairs, n, &f);
    json_t *o = json_object();
    if (!o) return NULL;
    json_object_set_new(o, "index", part_json(m, idx_b, idx_bl, idx_e, idx_el, NULL, 0));
    json_object_set_new(o, "records", part_json(m, rec_b, rec_bl, rec_e, rec_el, pairs, n));
    json_object_set_new(o, "fractions",
                        json_pack("{s:I,s:I,s:I,s:f,s:f}", "records", (json_int_t)f.records, "server_disjoint",
                                  (json_int_t)f.server_disjoint, "host_disjoint", (json_int_t)f.host_disjoint,
                                  "server_disjoint_fraction", f.server_fraction, "host_disjoint_fraction",
                                  f.host_fraction));
    return o;
}
