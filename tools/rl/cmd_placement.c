/* cmd_placement.c — `rl placement`: explicit, deterministic shard placement on a cluster.
 *
 *   rl placement split  [--db URL] KEY
 *   rl placement assign [--db URL] --begin K --end K --team ID,ID
 *   rl placement place  [--db URL] [--store PREFIX] --index NAME --index-team ID,ID
 *                       --records-team ID,ID[;ID,ID...]
 *   rl placement show   [--db URL] [--store PREFIX] --index NAME [--json]
 *
 * Keys are in FoundationDB's printable form (\xNN, \\). The logic is in src/app/placement.c
 * and src/app/placement_store.c; docs/design.md §8.6 describes it.
 * Exit codes: 0 success, 1 failure, 2 usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/args.h"
#include "base/bytes.h"
#include "app/placement_store.h"
#include "app/tool.h"
#include "app/placement.h"

enum { P_SPLIT = 0, P_ASSIGN = 1, P_PLACE = 2, P_SHOW = 3 };

#define MAX_TEAMS 64

/* Parse "ID,ID,..." into ids (1..16 distinct positive ids). */
static int parse_team(const char *s, uint32_t *ids, uint32_t *n, rl__errdetail *err) {
    *n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        unsigned long v = strtoul(p, &end, 10);
        if (end == p || v == 0 || v > UINT32_MAX || (*end && *end != ',')) {
            rl__errdetail_set(err, "'%s' is not a list of storage ids (ID,ID,...)", s);
            return RL_E_INVALID_ARGUMENT;
        }
        if (*n == RL_PROTO_MAX_TEAM) {
            rl__errdetail_set(err, "'%s' names more than %d storage ids", s, RL_PROTO_MAX_TEAM);
            return RL_E_INVALID_ARGUMENT;
        }
        for (uint32_t i = 0; i < *n; i++)
            if (ids[i] == (uint32_t)v) {
                rl__errdetail_set(err, "'%s' names storage id %lu twice", s, v);
                return RL_E_INVALID_ARGUMENT;
            }
        ids[(*n)++] = (uint32_t)v;
        p = *end ? end + 1 : end;
        if (*end == ',' && !*p) {
            rl__errdetail_set(err, "'%s' ends with a comma", s);
            return RL_E_INVALID_ARGUMENT;
        }
    }
    if (*n == 0) {
        rl__errdetail_set(err, "the team is empty");
        return RL_E_INVALID_ARGUMENT;
    }
    return RL_OK;
}

static int failed(const char *what, int rc, const rl__errdetail *err) {
    fprintf(stderr, "rl placement %s: %s (%d): %s\n", what, rl_error_name(rc), rc,
            rl__errdetail_len(err) ? rl__errdetail_get(err) : rl_error_message(rc));
    return 1;
}

/* The text form of a receipt part. */
static void print_part(const char *title, json_t *part) {
    printf("%s [%s, %s):\n", title, json_string_value(json_object_get(part, "begin")),
           json_string_value(json_object_get(part, "end")));
    size_t i;
    json_t *sh;
    json_array_foreach(json_object_get(part, "shards"), i, sh) {
        printf("  [%s, %s) team", json_string_value(json_object_get(sh, "begin")),
               json_string_value(json_object_get(sh, "end")));
        size_t j;
        json_t *m;
        json_array_foreach(json_object_get(sh, "team"), j, m) printf(
            " %lld@%s:%lld(%s)", (long long)json_integer_value(json_object_get(m, "id")),
            json_string_value(json_object_get(m, "address")), (long long)json_integer_value(json_object_get(m, "port")),
            json_string_value(json_object_get(m, "host")));
        if (json_object_get(sh, "records"))
            printf("  records %lld", (long long)json_integer_value(json_object_get(sh, "records")));
        printf("\n");
    }
}

int rl_cmd_placement(int argc, char **argv) {
    const char *url = NULL, *key = NULL, *begin = NULL, *end = NULL, *team = NULL, *store = NULL, *index = NULL,
               *index_team = NULL, *records_team = NULL, *key_file = NULL;
    int which = -1, code, as_json = 0;
    double timeout_s = RL_PLACEMENT_DEFAULT_TIMEOUT_MS / 1000.0;
    const rl__arg opts[] = {RL__TOOL_OPT_DB_HELP(&url, "the cluster: cluster:FILE"),
                            {.name = "key-file",
                             .kind = RL_ARG_STRING,
                             .dest = &key_file,
                             .metavar = "FILE",
                             .flags = RL_ARG_NONEMPTY | RL_ARG_NO_DEFAULT,
                             .help = "the cluster's key file, which splits and moves need (default: cluster.key beside "
                                     "the cluster file, where rl cluster up writes it)"},
                            {.name = "timeout",
                             .kind = RL_ARG_DOUBLE,
                             .dest = &timeout_s,
                             .metavar = "S",
                             .dmin = 0.1,
                             .dmax = 3600,
                             .help = "seconds to wait for each split or move, and (place, show) for each "
                                     "transaction before giving up with transaction_timed_out (1031); a request that "
                                     "waits for a server is reported on stderr after 3 s"},
                            {0}};
    const rl__arg split_pos[] = {{.name = "KEY",
                                  .kind = RL_ARG_STRING,
                                  .dest = &key,
                                  .help = "split the shard holding KEY at KEY (printable form)"},
                                 {0}};
    const rl__arg assign_opts[] = {{.name = "begin",
                                    .kind = RL_ARG_STRING,
                                    .dest = &begin,
                                    .metavar = "K",
                                    .flags = RL_ARG_REQUIRED,
                                    .help = "the range's first key (printable form)"},
                                   {.name = "end",
                                    .kind = RL_ARG_STRING,
                                    .dest = &end,
                                    .metavar = "K",
                                    .flags = RL_ARG_REQUIRED,
                                    .help = "the key after the range (printable form; at most \\xff)"},
                                   {.name = "team",
                                    .kind = RL_ARG_STRING,
                                    .dest = &team,
                                    .metavar = "ID,ID",
                                    .flags = RL_ARG_REQUIRED,
                                    .help = "the storage servers to hold the range"},
                                   {0}};
    const rl__arg place_opts[] = {RL__TOOL_OPT_STORE(&store),
                                  {.name = "index",
                                   .kind = RL_ARG_STRING,
                                   .dest = &index,
                                   .metavar = "NAME",
                                   .flags = RL_ARG_REQUIRED,
                                   .help = "the index (the Order store has price_idx)"},
                                  {.name = "index-team",
                                   .kind = RL_ARG_STRING,
                                   .dest = &index_team,
                                   .metavar = "ID,ID",
                                   .flags = RL_ARG_REQUIRED,
                                   .help = "the team of the index's entries"},
                                  {.name = "records-team",
                                   .kind = RL_ARG_STRING,
                                   .dest = &records_team,
                                   .metavar = "ID,ID[;ID,ID...]",
                                   .flags = RL_ARG_REQUIRED,
                                   .help = "the records' teams: the records split evenly into one range per team"},
                                  {0}};
    const rl__arg show_opts[] = {
        RL__TOOL_OPT_STORE(&store),
        {.name = "index",
         .kind = RL_ARG_STRING,
         .dest = &index,
         .metavar = "NAME",
         .flags = RL_ARG_REQUIRED,
         .help = "the index (the Order store has price_idx)"},
        {.name = "json",
         .kind = RL_ARG_FLAG,
         .dest = &as_json,
         .help = "print the placement receipt as JSON (the \"receipt\" member is deterministic)"},
        {0}};
    const rl__args_cmd split = {.name = "rl placement split",
                                .brief = "split the shard holding KEY at KEY (same team both halves)",
                                .pos = split_pos};
    const rl__args_cmd assign = {.name = "rl placement assign",
                                 .brief = "make [begin, end) whole shards and move them to a team; returns when done",
                                 .opts = assign_opts};
    const rl__args_cmd place = {.name = "rl placement place",
                                .brief = "put a store's index on one team and its records evenly on others",
                                .opts = place_opts};
    const rl__args_cmd show = {.name = "rl placement show",
                               .brief = "print the index and record shards, their teams and the disjoint fractions",
                               .opts = show_opts};
    const rl__args_cmd *subs[] = {&split, &assign, &place, &show, NULL};
    const rl__args_cmd cmd = {.name = "rl placement",
                              .summary =
                                  "Explicit, deterministic placement on a cluster: splits and moves go through the\n"
                                  "coordinator (the shard map in the system keyspace changes at a version; data moves\n"
                                  "before ownership switches, so reads and writes keep working).",
                              .epilog = "Exit codes: 0 success, 1 failure, 2 usage.",
                              .opts = opts,
                              .subs = subs,
                              .sub_dest = &which};
    if (rl__args_parse(&cmd, argc, argv, &code)) return code;
    rl__tool_db dbu;
    if (rl__tool_db_choose(&cmd, url, &dbu, &code)) return code;
    url = dbu.url;
    int timeout_ms = (int)(timeout_s * 1000.0);
    const rl__tool_wait wait = {.prog = "rl placement", .timeout_ms = rl__tool_wait_ms(timeout_s)};
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    rl_buf kb, eb;
    rl__buf_init(&kb);
    rl__buf_init(&eb);
    rl__errdetail err;
    rl__errdetail_init(&err, NULL);
    int rc = RL_OK, exit_code = 0;
    switch (which) {
    case P_SPLIT: {
        if (rl__args_unescape(key, &kb, &err) != RL_OK) {
            exit_code = rl__args_usage_error(&split, "KEY: %s", rl__errdetail_get(&err));
            break;
        }
        rl__version v = 0;
        int did = 0;
        rc = rl__placement_split(url, key_file, kb.data, kb.len, timeout_ms, &v, &did, &msg);
        if (rc) {
            exit_code = failed("split", rc, &msg);
            break;
        }
        printf("%s at version %llu\n", did ? "split" : "already a boundary", (unsigned long long)v);
        break;
    }
    case P_ASSIGN: {
        uint32_t ids[RL_PROTO_MAX_TEAM], n = 0;
        if (rl__args_unescape(begin, &kb, &err) != RL_OK || rl__args_unescape(end, &eb, &err) != RL_OK ||
            parse_team(team, ids, &n, &err) != RL_OK) {
            exit_code = rl__args_usage_error(&assign, "%s", rl__errdetail_get(&err));
            break;
        }
        rl__version v = 0;
        uint32_t moved = 0;
        rc =
            rl__placement_assign(url, key_file, kb.data, kb.len, eb.data, eb.len, ids, n, timeout_ms, &v, &moved, &msg);
        if (rc) {
            exit_code = failed("assign", rc, &msg);
            break;
        }
        printf("%u shard%s moved; the range is on the team from version %llu\n", moved, moved == 1 ? "" : "s",
               (unsigned long long)v);
        break;
    }
    case P_PLACE: {
        uint32_t it[RL_PROTO_MAX_TEAM], nit = 0;
        static uint32_t rt[MAX_TEAMS][RL_PROTO_MAX_TEAM];
        uint32_t nrt[MAX_TEAMS], n_teams = 0;
        const uint32_t *rtp[MAX_TEAMS];
        if (parse_team(index_team, it, &nit, &err) != RL_OK) {
            exit_code = rl__args_usage_error(&place, "--index-team: %s", rl__errdetail_get(&err));
            break;
        }
        char *copy = strdup(records_team);
        int bad = !copy;
        for (char *p = copy; !bad;) {
            char *semi = strchr(p, ';');
            if (semi) *semi = 0;
            if (n_teams == MAX_TEAMS || parse_team(p, rt[n_teams], &nrt[n_teams], &err)) {
                if (n_teams == MAX_TEAMS) rl__errdetail_set(&err, "more than %d teams", MAX_TEAMS);
                bad = 1;
                break;
            }
            rtp[n_teams] = rt[n_teams];
            n_teams++;
            if (!semi) break;
            p = semi + 1;
        }
        free(copy);
        if (bad) {
            exit_code = rl__args_usage_error(&place, "--records-team: %s", rl__errdetail_get(&err));
            break;
        }
        rc = rl__tool_placement_place(url, key_file, store, index, it, nit, rtp, nrt, n_teams, timeout_ms, &wait, &msg);
        if (rc) {
            exit_code = failed("place", rc, &msg);
            break;
        }
        printf("placed the index on one team and the records on %u team%s\n", n_teams, n_teams == 1 ? "" : "s");
        break;
    }
    case P_SHOW: {
        json_t *o = NULL;
        rc = rl__tool_placement_show(url, store, index, &wait, &o, &msg);
        if (rc) {
            exit_code = failed("show", rc, &msg);
            break;
        }
        if (as_json) {
            char *s = json_dumps(o, JSON_SORT_KEYS | JSON_COMPACT | JSON_REAL_PRECISION(6));
            if (s) printf("%s\n", s);
            free(s);
        } else {
            json_t *r = json_object_get(o, "receipt"), *f = json_object_get(r, "fractions");
            printf("read version %lld\n", (long long)json_integer_value(json_object_get(o, "read_version")));
            print_part("index", json_object_get(r, "index"));
            print_part("records", json_object_get(r, "records"));
            printf("server-disjoint fraction %.6f (%lld of %lld records)\n",
                   json_real_value(json_object_get(f, "server_disjoint_fraction")),
                   (long long)json_integer_value(json_object_get(f, "server_disjoint")),
                   (long long)json_integer_value(json_object_get(f, "records")));
            printf("host-disjoint fraction %.6f (%lld of %lld records)\n",
                   json_real_value(json_object_get(f, "host_disjoint_fraction")),
                   (long long)json_integer_value(json_object_get(f, "host_disjoint")),
                   (long long)json_integer_value(json_object_get(f, "records")));
        }
        json_decref(o);
        break;
    }
    default: exit_code = 2;
    }
    rl__buf_release(&kb);
    rl__buf_release(&eb);
    return exit_code;
}
