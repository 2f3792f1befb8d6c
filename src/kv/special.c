/* special.c — the part of FoundationDB's special-key space ("\xff\xff" and above) reclayer has:
 * keys that are not stored but computed when read, so that tools and operators read status through
 * any binding:
 *
 *   \xff\xff/status/json         the status document in FoundationDB's schema (below)
 *   \xff\xff/connection_string   the cluster file's connection string (cluster: databases)
 *   \xff\xff/cluster_file_path   the cluster file's path (cluster: databases)
 *
 * On an embedded database the last two are absent. On fdb: the read goes to FoundationDB itself
 * (its special-key space is the real one). Every other key at or above "\xff\xff" stays outside the
 * legal range (key_outside_legal_range, 2004), as before. Reads here add no conflict range.
 *
 * The status document (rl__status_fdb_json) takes FoundationDB's schema (its documentation's
 * "status json") for what reclayer has, from the backend's own status (rl_db_status_json), and
 * leaves out what reclayer does not have rather than inventing it:
 *   client: cluster_file {path, up_to_date}, coordinators {coordinators [{address, reachable}],
 *           quorum_reachable}, database_status {available, healthy}, messages [{name,
 *           description}], timestamp (Unix seconds)
 *   cluster: connection_string, database_available, processes {ID: {address, machine_id,
 *           degraded, roles [{role, id, data_version, durable_version}]}}, data
 *           {partitions_count, total_kv_size_bytes}
 * Embedded databases have no cluster file, coordinators or processes: those members are absent.
 * A read of these keys is computed on a thread of its own (rl__special_start): a cluster's status
 * waits for its processes, which must never happen on the thread that answers them (the cluster
 * client's network thread, where callbacks may run). Close the database only after such a read's
 * future is ready, as for every read.
 */
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "kv/kv_int.h"

#define SK_STATUS "\xff\xff/status/json"
#define SK_CONN "\xff\xff/connection_string"
#define SK_PATH "\xff\xff/cluster_file_path"

static int is(const uint8_t *k, uint32_t kl, const char *name) { return kl == strlen(name) && !memcmp(k, name, kl); }

int rl__special_key(const rl_db *db, const uint8_t *k, uint32_t kl) {
    if (kl < 2 || k[0] != 0xff || k[1] != 0xff || !strcmp(db->be->vt->name, "fdb")) return 0;
    return is(k, kl, SK_STATUS) || is(k, kl, SK_CONN) || is(k, kl, SK_PATH);
}

int rl__special_forwarded(const rl_db *db, const uint8_t *k, uint32_t kl) {
    return kl >= 2 && k[0] == 0xff && k[1] == 0xff && !strcmp(db->be->vt->name, "fdb");
}

/* The backend's status, parsed (NULL when it cannot be had or parsed). */
static json_t *backend_status(rl_db *db) {
    char *js = NULL;
    if (rl_db_status_json(db, &js) != RL_OK) return NULL;
    json_t *j = json_loads(js, 0, NULL);
    rl_free(js);
    return j;
}

/* The connection string: the first line of the cluster file that is not a comment. */
static json_t *connection_string(const char *path) {
    FILE *f = path ? fopen(path, "r") : NULL;
    char line[1024];
    json_t *out = NULL;
    while (f && !out && fgets(line, sizeof line, f)) {
        size_t n = strcspn(line, "\r\n");
        line[n] = 0;
        if (n && line[0] != '#') out = json_string(line);
    }
    if (f) fclose(f);
    return out;
}

static void message(json_t *msgs, const char *name, const char *description) {
    json_array_append_new(msgs, json_pack("{s:s, s:s}", "name", name, "description", description));
}

/* The processes of a cluster, from the client's location cache and the servers' own STATUS. */
static json_t *processes(json_t *st, int *out_healthy) {
    json_t *procs = json_object(),
           *servers = json_object_get(json_object_get(json_object_get(st, "client"), "location_cache"), "servers");
    json_t *storage = json_object_get(st, "storage");
    size_t i, j;
    json_t *s;
    *out_healthy = 1;
    json_array_foreach(servers, i, s) {
        json_int_t id = json_integer_value(json_object_get(s, "id"));
        const char *role = json_string_value(json_object_get(s, "role"));
        const char *addr = json_string_value(json_object_get(s, "address"));
        int healthy = json_is_true(json_object_get(s, "healthy"));
        char key[32], address[64], sid[32];
        snprintf(key, sizeof key, "%s-%lld", role ? role : "process", (long long)id);
        snprintf(address, sizeof address, "%s:%lld", addr ? addr : "",
                 (long long)json_integer_value(json_object_get(s, "port")));
        snprintf(sid, sizeof sid, "%lld", (long long)id);
        if (!healthy) *out_healthy = 0;
        json_t *r = json_pack("{s:s, s:s}", "role", role ? role : "unknown", "id", sid);
        json_t *ss;
        json_array_foreach(storage, j, ss) { /* a storage server's own versions, when it answered */
            if (json_integer_value(json_object_get(ss, "id")) != id) continue;
            json_t *lv = json_object_get(ss, "applied_version"), *dv = json_object_get(ss, "durable_version");
            if (json_is_integer(lv)) json_object_set(r, "data_version", lv);
            if (json_is_integer(dv)) json_object_set(r, "durable_version", dv);
        }
        json_t *p = json_pack("{s:s, s:b, s:[o]}", "address", address, "degraded", !healthy, "roles", r);
        json_t *host = json_object_get(s, "host");
        if (json_is_string(host)) json_object_set(p, "machine_id", host);
        json_object_set_new(procs, key, p);
    }
    return procs;
}

int rl__status_fdb_json(rl_db *db, rl_buf *out) {
    json_t *st = backend_status(db);
    if (!st) return RL_E_OUT_OF_MEMORY;
    const char *backend = json_string_value(json_object_get(st, "backend"));
    int is_cluster = backend && !strcmp(backend, "cluster");
    json_t *client = json_object(), *cluster = json_object(), *msgs = json_array();
    int available = 1, healthy = 1;
    if (is_cluster) {
        const char *path = json_string_value(json_object_get(st, "cluster_file"));
        json_t *co = json_object_get(st, "cluster");
        int reachable = json_is_object(co);
        available = json_is_integer(json_object_get(st, "read_version"));
        json_object_set_new(client, "cluster_file", json_pack("{s:s?, s:b}", "path", path, "up_to_date", 1));
        json_object_set_new(client, "coordinators",
                            json_pack("{s:[{s:O, s:b}], s:b}", "coordinators", "address",
                                      json_object_get(st, "coordinator"), "reachable", reachable, "quorum_reachable",
                                      reachable));
        if (!reachable) message(msgs, "quorum_not_reachable", "Unable to reach the coordinator.");
        if (!available) message(msgs, "unreadable_configuration", "No read version could be had.");
        json_t *cs = connection_string(path);
        if (cs) json_object_set_new(cluster, "connection_string", cs);
        json_object_set_new(cluster, "processes", processes(st, &healthy));
        json_t *shards = json_object_get(json_object_get(json_object_get(st, "client"), "location_cache"), "shards");
        json_object_set_new(cluster, "data",
                            json_pack("{s:I}", "partitions_count", (json_int_t)json_array_size(shards)));
        if (!json_is_array(json_object_get(st, "storage")) && reachable)
            message(msgs, "status_incomplete", "Only the client's view is available from this thread.");
    } else {
        json_t *bytes = json_object_get(st, "bytes");
        json_t *data = json_object();
        if (json_is_integer(bytes)) json_object_set(data, "total_kv_size_bytes", bytes);
        json_object_set_new(cluster, "data", data);
        if (json_is_true(json_object_get(st, "poisoned"))) healthy = 0;
    }
    json_object_set_new(client, "database_status",
                        json_pack("{s:b, s:b}", "available", available, "healthy", available && healthy));
    json_object_set_new(client, "messages", msgs);
    json_object_set_new(client, "timestamp", json_integer((json_int_t)time(NULL)));
    json_object_set_new(cluster, "database_available", json_boolean(available));
    json_t *doc = json_pack("{s:o, s:o}", "client", client, "cluster", cluster);
    json_decref(st);
    char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    if (!text) return RL_E_OUT_OF_MEMORY;
    rl__buf_append(out, text, strlen(text));
    free(text); /* jansson's allocation */
    return rl__buf_error(out);
}

int rl__special_get(rl_db *db, const uint8_t *k, uint32_t kl, rl_arena *a, int *out_present, const uint8_t **out_v,
                    uint32_t *out_len) {
    rl_buf b;
    rl__buf_init(&b);
    int rc = RL_OK;
    *out_present = 0;
    *out_v = NULL;
    *out_len = 0;
    if (is(k, kl, SK_STATUS)) {
        rc = rl__status_fdb_json(db, &b);
    } else if (strcmp(db->be->vt->name, "cluster") == 0) { /* the two cluster file keys */
        json_t *st = backend_status(db);
        const char *path = json_string_value(json_object_get(st, "cluster_file"));
        if (is(k, kl, SK_PATH) && path) {
            rl__buf_append(&b, path, strlen(path));
        } else if (path) {
            json_t *cs = connection_string(path);
            if (cs) rl__buf_append(&b, json_string_value(cs), strlen(json_string_value(cs)));
            json_decref(cs);
        }
        json_decref(st);
        if (!st) rc = RL_E_OUT_OF_MEMORY;
    }
    if (rc == RL_OK) rc = rl__buf_error(&b);
    if (rc == RL_OK && b.len) {
        uint8_t *v = rl__arena_memdup(a, b.data, b.len);
        if (!v) rc = RL_E_OUT_OF_MEMORY;
        else *out_present = 1, *out_v = v, *out_len = (uint32_t)b.len;
    }
    rl__buf_release(&b);
    return rc;
}

/* ---- Reads off the caller's thread -------------------------------------------------------- */

typedef struct {
    rl_db *db;
    rl_future *f; /* one reference held */
    uint32_t kl;
    uint8_t k[]; /* the key */
} job;

static void *job_main(void *arg) {
    job *j = arg;
    rl_future *f = j->f;
    int rc = rl__special_get(j->db, j->k, j->kl, &f->arena, &f->present, &f->data, &f->len);
    rl__free(j);
    rl__future_complete_unref(f, rc);
    return NULL;
}

void rl__special_start(rl_db *db, const uint8_t *k, uint32_t kl, rl_future *f) {
    job *j = rl__malloc(sizeof *j + kl);
    pthread_t th;
    pthread_attr_t attr;
    if (j) {
        j->db = db;
        j->f = f;
        j->kl = kl;
        memcpy(j->k, k, kl);
        rl__future_ref(f);
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int started = pthread_create(&th, &attr, job_main, j) == 0;
        pthread_attr_destroy(&attr);
        if (started) return;
        rl__future_unref(f);
        rl__free(j);
    }
    /* No thread: compute here (a cluster's status then gives only the client's view if this is
     * its network thread). */
    int rc = rl__special_get(db, k, kl, &f->arena, &f->present, &f->data, &f->len);
    rl__future_complete(f, rc);
}
