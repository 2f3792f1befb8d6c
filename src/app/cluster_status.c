/* cluster_status.c — a cluster's processes as one table (rl cluster status, rl shell's status)
 * and the client's view of them in the shape `rl cluster status --json` has (cluster_status.h).
 */
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "app/cluster_status.h"
#include "base/buf.h"
#include "base/bytes.h"
#include "reclayer/error.h"

/* ---------------------------------------------------------------------------------------------
 * The table
 * ------------------------------------------------------------------------------------------ */

/* Print a shard list of a STATUS reply: ["BEGIN", "END") ... in printable form. */
static void print_shards(FILE *f, json_t *shards) {
    size_t i;
    json_t *sh;
    int first = 1;
    json_array_foreach(shards, i, sh) {
        const char *hb = json_string_value(json_object_get(sh, "begin"));
        const char *he = json_string_value(json_object_get(sh, "end"));
        rl_buf b, e, pb, pe;
        rl__buf_init(&b), rl__buf_init(&e), rl__buf_init(&pb), rl__buf_init(&pe);
        if (hb) rl__bytes_from_hex(&b, hb, strlen(hb));
        if (he) rl__bytes_from_hex(&e, he, strlen(he));
        rl__bytes_printable(&pb, b.data, b.len);
        rl__bytes_printable(&pe, e.data, e.len);
        fprintf(f, "%s[\"%s\", \"%s\")", first ? "" : " ", pb.data, pe.data);
        json_t *team = json_object_get(sh, "team");
        if (json_is_array(team)) {
            fprintf(f, " team");
            size_t j;
            json_t *m;
            json_array_foreach(team, j, m) fprintf(f, "%s%lld", j ? "," : " ", (long long)json_integer_value(m));
        }
        first = 0;
        rl__buf_release(&b), rl__buf_release(&e), rl__buf_release(&pb), rl__buf_release(&pe);
    }
    if (first) fprintf(f, "-");
}

static long long num(json_t *o, const char *k) { return (long long)json_integer_value(json_object_get(o, k)); }

/* A string field, or "-" when absent. */
static const char *str_or_dash(json_t *o, const char *k) {
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "-";
}

void rl__cluster_status_print(FILE *f, json_t *root) {
    const char *dir = json_string_value(json_object_get(root, "dir"));
    if (dir) fprintf(f, "cluster %s (%s)\n", dir, str_or_dash(root, "cluster_file"));
    else
        fprintf(f, "cluster %s (coordinator %s)\n", str_or_dash(root, "cluster_file"),
                str_or_dash(root, "coordinator"));
    fprintf(f, "%-12s %3s  %-6s %-16s %-11s %8s  %-5s  %-8s  %s\n", "ROLE", "ID", "HOST", "ADDRESS", "DELAY(us)", "PID",
            "ALIVE", "HEALTH", "VERSIONS / SHARDS");
    size_t i;
    json_t *p;
    json_array_foreach(json_object_get(root, "processes"), i, p) {
        const char *role = json_string_value(json_object_get(p, "role"));
        char addr[64], delay[32], pid[24];
        const char *ip = json_string_value(json_object_get(p, "address"));
        snprintf(addr, sizeof addr, "%s:%lld", ip ? ip : "?", num(p, "port"));
        if (num(p, "jitter_us")) snprintf(delay, sizeof delay, "%lld+-%lld", num(p, "delay_us"), num(p, "jitter_us"));
        else snprintf(delay, sizeof delay, "%lld", num(p, "delay_us"));
        if (json_is_integer(json_object_get(p, "pid"))) snprintf(pid, sizeof pid, "%lld", num(p, "pid"));
        else snprintf(pid, sizeof pid, "-");
        json_t *alive_j = json_object_get(p, "alive");
        int healthy = json_is_true(json_object_get(p, "healthy"));
        fprintf(f, "%-12s %3lld  %-6s %-16s %-11s %8s  %-5s  %-8s  ", role ? role : "?", num(p, "id"),
                str_or_dash(p, "host"), addr, delay, pid,
                !alive_j                ? "-"
                : json_is_true(alive_j) ? "yes"
                                        : "no",
                healthy ? "healthy" : "DOWN");
        json_t *st = json_object_get(p, "status");
        if (json_is_object(st)) {
            if (role && !strcmp(role, "coordinator"))
                fprintf(f, "committed %lld durable %lld commits %lld log %lld B; ", num(st, "committed_version"),
                        num(st, "durable_version"), num(st, "commits"), num(st, "log_bytes"));
            else
                fprintf(f, "applied %lld known %lld durable %lld keys %lld; ", num(st, "applied_version"),
                        num(st, "known_version"), num(st, "durable_version"), num(st, "keys"));
            print_shards(f, json_object_get(st, "shards"));
        }
        const char *err = json_string_value(json_object_get(p, "error"));
        if (err) fprintf(f, "%s(%s)", json_is_object(st) ? " " : "", err);
        const char *log = json_string_value(json_object_get(p, "log"));
        if (log && (!json_is_true(alive_j) || !healthy)) fprintf(f, "  log: %s", log);
        fprintf(f, "\n");
    }
}

/* ---------------------------------------------------------------------------------------------
 * The client's view
 * ------------------------------------------------------------------------------------------ */

int rl__cluster_coord_lists_healthy(json_t *coord_status, uint32_t id) {
    size_t i;
    json_t *sv;
    json_array_foreach(json_object_get(coord_status, "servers"), i, sv) {
        if ((uint32_t)json_integer_value(json_object_get(sv, "id")) != id) continue;
        json_t *reg = json_object_get(sv, "registered");
        return json_is_true(json_object_get(sv, "healthy")) && (!reg || json_is_true(reg));
    }
    return 0;
}

/* The element of array arr whose "id" is id, or NULL. */
static json_t *by_id(json_t *arr, uint32_t id) {
    size_t i;
    json_t *e;
    json_array_foreach(arr, i, e) if (json_is_object(e) && json_is_integer(json_object_get(e, "id")) &&
                                      (uint32_t)json_integer_value(json_object_get(e, "id")) == id) return e;
    return NULL;
}

/* Copy key k of from into to when from has it. */
static void copy_field(json_t *to, json_t *from, const char *k) {
    json_t *v = json_object_get(from, k);
    if (v) json_object_set(to, k, v);
}

/* One process of the client's view: where it is (map: the shard map's entry, may be NULL; st: its
 * STATUS, may be NULL), healthy or why not. Returns the new object (NULL: out of memory). */
static json_t *client_proc(const char *role, uint32_t id, json_t *map, json_t *st, json_t *coord_st, json_t *errors,
                           int *all_ok) {
    json_t *o = json_object();
    if (!o) return NULL;
    json_object_set_new(o, "role", json_string(role));
    json_object_set_new(o, "id", json_integer(id));
    json_t *src = st ? st : map;
    copy_field(o, src, "address");
    copy_field(o, src, "port");
    copy_field(o, map && json_object_get(map, "host") ? map : st, "host");
    if (st) copy_field(o, st, "pid");
    int is_coord = !strcmp(role, "coordinator");
    int healthy = st != NULL && (is_coord || (coord_st && rl__cluster_coord_lists_healthy(coord_st, id)));
    json_object_set_new(o, "healthy", json_boolean(healthy));
    json_t *d = st ? json_object_get(st, "delay_us") : NULL, *j = st ? json_object_get(st, "jitter_us") : NULL;
    json_object_set_new(o, "delay_us", json_is_integer(d) ? json_incref(d) : json_integer(0));
    json_object_set_new(o, "jitter_us", json_is_integer(j) ? json_incref(j) : json_integer(0));
    json_object_set(o, "status", st ? st : json_null());
    if (!st) {
        char key[32];
        if (is_coord) snprintf(key, sizeof key, "cluster");
        else snprintf(key, sizeof key, "storage %u", id);
        const char *why = json_string_value(json_object_get(errors, key));
        char msg[160];
        snprintf(msg, sizeof msg, "no STATUS reply: %s", why ? why : "not asked (not in the shard map)");
        json_object_set_new(o, "error", json_string(msg));
    } else if (!healthy) {
        json_object_set_new(o, "error",
                            json_string(coord_st ? "the coordinator does not list it as registered and "
                                                   "healthy"
                                                 : "the coordinator did not answer"));
    }
    if (!healthy) *all_ok = 0;
    return o;
}

int rl__cluster_status_from_client(json_t *db_status, json_t **out) {
    *out = NULL;
    const char *backend = json_string_value(json_object_get(db_status, "backend"));
    if (!json_is_object(db_status) || !backend || strcmp(backend, "cluster") != 0) return RL_E_INVALID_ARGUMENT;
    json_t *root = json_object(), *procs = json_array();
    if (!root || !procs) {
        json_decref(root);
        json_decref(procs);
        return RL_E_OUT_OF_MEMORY;
    }
    copy_field(root, db_status, "cluster_file");
    copy_field(root, db_status, "coordinator");
    copy_field(root, db_status, "read_version");
    copy_field(root, db_status, "keys");
    json_t *coord_st = json_object_get(db_status, "cluster");
    if (!json_is_object(coord_st)) coord_st = NULL;
    json_t *storage = json_object_get(db_status, "storage"), *errors = json_object_get(db_status, "errors");
    json_t *map_servers =
        json_object_get(json_object_get(json_object_get(db_status, "client"), "location_cache"), "servers");
    int all_ok = 1, oom = 0;
    /* The coordinator first, then the storage servers in the map's order, then any other the
     * coordinator lists (a server the client's map does not know yet). */
    json_t *o = client_proc("coordinator", 0, by_id(map_servers, 0), coord_st, coord_st, errors, &all_ok);
    oom |= !o || json_array_append_new(procs, o);
    size_t i;
    json_t *sv;
    json_array_foreach(map_servers, i, sv) {
        const char *role = json_string_value(json_object_get(sv, "role"));
        if (!role || strcmp(role, "storage") != 0) continue;
        uint32_t id = (uint32_t)json_integer_value(json_object_get(sv, "id"));
        o = client_proc("storage", id, sv, by_id(storage, id), coord_st, errors, &all_ok);
        oom |= !o || json_array_append_new(procs, o);
    }
    json_array_foreach(coord_st ? json_object_get(coord_st, "servers") : NULL, i, sv) {
        uint32_t id = (uint32_t)json_integer_value(json_object_get(sv, "id"));
        if (by_id(map_servers, id)) continue;
        o = client_proc("storage", id, sv, by_id(storage, id), coord_st, errors, &all_ok);
        oom |= !o || json_array_append_new(procs, o);
    }
    json_object_set_new(root, "ok", json_boolean(all_ok));
    json_object_set_new(root, "processes", procs);
    copy_field(root, db_status, "errors");
    copy_field(root, db_status, "client");
    if (oom) {
        json_decref(root);
        return RL_E_OUT_OF_MEMORY;
    }
    *out = root;
    return all_ok ? RL_OK : RL_E_SERVER_UNAVAILABLE;
}
