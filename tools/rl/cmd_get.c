/* cmd_get.c — `rl get`: print one Order record as JSON, with its version.
 *
 *   rl get [--db URL] [--store PREFIX] --pk ID [--timeout S]
 *
 * Prints {"type", "pk", "version" (24 hex digits: 10-byte global + 2-byte local, or null),
 * "stored_bytes", "chunks", "record": {fields}} on one line. The database is opened read-only.
 * A request waiting for a server is reported on stderr after 3 s, and the command gives up after
 * --timeout seconds (default 30) with transaction_timed_out (app/tool.h, rl__tool_wait).
 * Exit codes: 0 found, 1 not found or failure, 2 usage.
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
    rl_record *out;
} get_ctx;

static int get_fn(rl_txn *txn, void *ud) {
    get_ctx *c = ud;
    rl_record_release(c->out);
    return rl_store_load(c->s, txn, c->pk, c->pk_len, c->out);
}

int rl_cmd_get(int argc, char **argv) {
    const char *url = NULL, *store = NULL;
    int64_t id = 0;
    int code;
    double timeout_s = RL__TOOL_DEFAULT_TIMEOUT_S;
    const rl__arg opts[] = {RL__TOOL_OPT_DB(&url),
                            RL__TOOL_OPT_STORE(&store),
                            RL__TOOL_OPT_TIMEOUT(&timeout_s),
                            {.name = "pk",
                             .kind = RL_ARG_INT64,
                             .dest = &id,
                             .metavar = "ID",
                             .flags = RL_ARG_REQUIRED,
                             .help = "the order_id"},
                            {0}};
    const rl__args_cmd cmd = {.name = "rl get",
                              .summary = "Print the Order with order_id ID as JSON, with its record version.",
                              .epilog = "Exit codes: 0 found, 1 not found or failure, 2 usage.",
                              .opts = opts};
    if (rl__args_parse(&cmd, argc, argv, &code)) return code;
    rl__tool_db dbu;
    if (rl__tool_db_choose(&cmd, url, &dbu, &code)) return code;
    url = dbu.url;
    rl__tool t;
    const rl__tool_wait w = {.prog = "rl get", .timeout_ms = rl__tool_wait_ms(timeout_s)};
    int rc = rl__tool_open_with(&t, url, store, 0, RL__TOOL_READ_ONLY, &w);
    if (rc) {
        fprintf(stderr, "rl get: %s (%d): %s\n", rl_error_name(rc), rc, rl__tool_errmsg(&t));
        return 1;
    }
    rl_buf out;
    rl_record r = {0};
    rl__buf_init(&out);
    rl_tuple_builder *k = NULL;
    const uint8_t *pk = NULL;
    size_t pk_len = 0;
    rc = rl_tuple_builder_new(&k);
    if (!rc) {
        rl_tuple_add_int(k, id);
        rc = rl_tuple_builder_result(k, &pk, &pk_len);
    }
    get_ctx c = {t.s, pk, pk_len, &r};
    if (!rc) rc = rl_db_run(t.db, get_fn, &c);
    if (!rc) rc = rl__tool_record_json(&r, &out);
    if (!rc) printf("%s\n", (const char *)out.data);
    else if (rc == RL_E_NOT_FOUND) fprintf(stderr, "rl get: no record with order_id %lld\n", (long long)id);
    else fprintf(stderr, "rl get: %s (%d): %s %s\n", rl_error_name(rc), rc, rl_error_message(rc), rl_store_errmsg(t.s));
    rl_record_release(&r);
    rl_tuple_builder_free(k);
    rl__buf_release(&out);
    rl__tool_close(&t);
    return rc ? 1 : 0;
}
