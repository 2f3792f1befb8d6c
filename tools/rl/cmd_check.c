/* cmd_check.c — `rl check`: run the integrity checker on a record store.
 *
 *   rl check [--db URL] [--store PREFIX] [--timeout S]
 *
 * Prints one line per defect ("defect KIND key=KEY MESSAGE"), the record and index-entry counts
 * and "integrity_ok = true|false". The database is opened read-only. A request waiting for a
 * server is reported on stderr after 3 s, and the command gives up after --timeout seconds
 * (default 30) with transaction_timed_out (app/tool.h, rl__tool_wait). Exit codes: 0 no defect,
 * 1 defects or failure, 2 usage.
 */
#include <stdio.h>
#include <string.h>

#include "app/args.h"
#include "app/tool.h"

typedef struct {
    rl_store *s;
    rl_check_report *r;
} check_ctx;

static int check_fn(rl_txn *txn, void *ud) {
    check_ctx *c = ud;
    rl_check_report_release(c->r);
    return rl_store_check(c->s, txn, c->r);
}

int rl_cmd_check(int argc, char **argv) {
    const char *url = NULL, *store = NULL;
    int code;
    double timeout_s = RL__TOOL_DEFAULT_TIMEOUT_S;
    const rl__arg opts[] = {RL__TOOL_OPT_DB(&url), RL__TOOL_OPT_STORE(&store), RL__TOOL_OPT_TIMEOUT(&timeout_s), {0}};
    const rl__args_cmd cmd = {
        .name = "rl check",
        .summary = "Walk a record store and list every defect (split records, stray keys, version keys,\n"
                   "unparsable records, orphan, stale and missing index entries).",
        .epilog = "Exit codes: 0 no defect, 1 defects or failure, 2 usage.",
        .opts = opts};
    if (rl__args_parse(&cmd, argc, argv, &code)) return code;
    rl__tool_db dbu;
    if (rl__tool_db_choose(&cmd, url, &dbu, &code)) return code;
    url = dbu.url;
    rl__tool t;
    const rl__tool_wait w = {.prog = "rl check", .timeout_ms = rl__tool_wait_ms(timeout_s)};
    int rc = rl__tool_open_with(&t, url, store, 0, RL__TOOL_READ_ONLY, &w);
    if (rc) {
        fprintf(stderr, "rl check: %s (%d): %s\n", rl_error_name(rc), rc, rl__tool_errmsg(&t));
        return 1;
    }
    rl_check_report r = {0};
    check_ctx c = {t.s, &r};
    rc = rl_db_run(t.db, check_fn, &c);
    code = 1;
    if (rc) {
        fprintf(stderr, "rl check: %s (%d): %s\n", rl_error_name(rc), rc, rl_error_message(rc));
    } else {
        rl_check_report_print(&r, stdout);
        code = r.n_defects ? 1 : 0;
    }
    rl_check_report_release(&r);
    rl__tool_close(&t);
    return code;
}
