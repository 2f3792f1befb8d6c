/* cmd_check.c — `rl check`: run the integrity checker on a record store.
 *
 *   rl check --db URL [--store PREFIX]
 *
 * Prints one line per defect ("defect KIND key=KEY MESSAGE"), the record and index-entry counts
 * and "integrity_ok = true|false". Exit codes: 0 no defect, 1 defects or failure, 2 usage.
 */
#include <stdio.h>
#include <string.h>

#include "record/record_int.h"

static void help(FILE *f) {
    fprintf(f, "usage: rl check --db URL [--store PREFIX]\n"
               "\n"
               "Walk a record store and list every defect (split records, stray keys, version keys,\n"
               "unparsable records, orphan, stale and missing index entries). Exits 1 on any defect.\n");
}

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
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            help(stdout);
            return 0;
        } else if (v && !strcmp(a, "--db")) {
            url = v, i++;
        } else if (v && !strcmp(a, "--store")) {
            store = v, i++;
        } else {
            fprintf(stderr, "rl check: unexpected argument '%s'\n", a);
            help(stderr);
            return 2;
        }
    }
    if (!url) {
        help(stderr);
        return 2;
    }
    rl__tool t;
    int rc = rl__tool_open(&t, url, store, 0, 1);
    if (rc) {
        fprintf(stderr, "rl check: %s: %s\n", rl_error_name(rc), rl_record_errmsg());
        return 1;
    }
    rl_check_report r = {0};
    check_ctx c = {t.s, &r};
    rc = rl_db_run(t.db, check_fn, &c);
    int code = 1;
    if (rc) {
        fprintf(stderr, "rl check: %s: %s\n", rl_error_name(rc), rl_error_message(rc));
    } else {
        rl_check_report_print(&r, stdout);
        code = r.n_defects ? 1 : 0;
    }
    rl_check_report_release(&r);
    rl__tool_close(&t);
    return code;
}
