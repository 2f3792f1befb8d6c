/* cmd_inject_defect.c — `rl inject-defect`: corrupt one record of a store on purpose, to test
 * the integrity checker.
 *
 *   rl inject-defect [--db URL] [--store PREFIX] --pk ID --kind delete-chunk|stray-suffix|version-key [--force]
 *
 * Refused (exit 1) unless the store was created by `rl load --allow-defects` or --force is given.
 * delete-chunk clears the record's first chunk (its only value when stored whole); stray-suffix
 * adds the key (1, ID, "stray"); version-key leaves only the record's version key. Exit codes:
 * 0 done, 1 refused or failure, 2 usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/args.h"
#include "app/tool.h"
#include "reclayer/tuple.h"

typedef struct {
    rl_store *s;
    const uint8_t *pk;
    size_t pk_len;
    rl_defect_kind kind;
    int flags;
} inject_ctx;

static int inject_fn(rl_txn *txn, void *ud) {
    inject_ctx *c = ud;
    return rl_store_inject_defect(c->s, txn, c->pk, c->pk_len, c->kind, c->flags);
}

int rl_cmd_inject_defect(int argc, char **argv) {
    const char *url = NULL, *store = NULL;
    int64_t id = 0;
    int k = 0, force = 0, code;
    double timeout_s = RL__TOOL_DEFAULT_TIMEOUT_S;
    static const rl__arg_choice kinds[] = {{"delete-chunk", RL_DEFECT_DELETE_CHUNK},
                                           {"stray-suffix", RL_DEFECT_STRAY_SUFFIX},
                                           {"version-key", RL_DEFECT_VERSION_KEY},
                                           {NULL, 0}};
    const rl__arg opts[] = {
        RL__TOOL_OPT_DB(&url),
        RL__TOOL_OPT_STORE(&store),
        RL__TOOL_OPT_TIMEOUT(&timeout_s),
        {.name = "pk",
         .kind = RL_ARG_INT64,
         .dest = &id,
         .metavar = "ID",
         .flags = RL_ARG_REQUIRED,
         .help = "the order_id of the record to corrupt"},
        {.name = "kind",
         .kind = RL_ARG_ENUM,
         .dest = &k,
         .metavar = "KIND",
         .flags = RL_ARG_REQUIRED,
         .choices = kinds,
         .help = "delete-chunk clears the first chunk, stray-suffix adds (1, ID, \"stray\"), version-key "
                 "leaves only the version key"},
        {.name = "force",
         .kind = RL_ARG_FLAG,
         .dest = &force,
         .help = "also for stores not loaded with --allow-defects"},
        {0}};
    const rl__args_cmd cmd = {.name = "rl inject-defect",
                              .summary =
                                  "Corrupt the Order with order_id ID on purpose, to test `rl check`. Only for stores\n"
                                  "loaded with --allow-defects, unless --force.",
                              .epilog = "Exit codes: 0 done, 1 refused or failure, 2 usage.",
                              .opts = opts};
    if (rl__args_parse(&cmd, argc, argv, &code)) return code;
    rl__tool_db dbu;
    if (rl__tool_db_choose(&cmd, url, &dbu, &code)) return code;
    url = dbu.url;
    int flags = force ? RL_DEFECT_FORCE : 0;
    const char *kind = NULL;
    for (int i = 0; kinds[i].name; i++)
        if (kinds[i].value == k) kind = kinds[i].name;
    rl__tool t;
    const rl__tool_wait w = {.prog = "rl inject-defect", .timeout_ms = rl__tool_wait_ms(timeout_s)};
    int rc = rl__tool_open_with(&t, url, store, 0, RL__TOOL_MUST_EXIST, &w);
    if (rc) {
        fprintf(stderr, "rl inject-defect: %s (%d): %s\n", rl_error_name(rc), rc, rl__tool_errmsg(&t));
        return 1;
    }
    rl_tuple_builder *kb = NULL;
    const uint8_t *pk = NULL;
    size_t pk_len = 0;
    rc = rl_tuple_builder_new(&kb);
    if (!rc) {
        rl_tuple_add_int(kb, id);
        rc = rl_tuple_builder_result(kb, &pk, &pk_len);
    }
    inject_ctx c = {t.s, pk, pk_len, k, flags};
    if (!rc) rc = rl_db_run(t.db, inject_fn, &c);
    if (rc == RL_E_CLIENT_INVALID_OPERATION) fprintf(stderr, "rl inject-defect: refused: %s\n", rl_store_errmsg(t.s));
    else if (rc == RL_E_NOT_FOUND) fprintf(stderr, "rl inject-defect: no record with order_id %lld\n", (long long)id);
    else if (rc)
        fprintf(stderr, "rl inject-defect: %s (%d): %s %s\n", rl_error_name(rc), rc, rl_error_message(rc),
                rl_store_errmsg(t.s));
    else printf("injected %s into order_id %lld\n", kind, (long long)id);
    rl_tuple_builder_free(kb);
    rl__tool_close(&t);
    return rc ? 1 : 0;
}
