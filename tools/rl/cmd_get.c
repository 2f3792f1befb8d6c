/* cmd_get.c — `rl get`: print one Order record as JSON, with its version.
 *
 *   rl get --db URL [--store PREFIX] --pk ID
 *
 * Prints {"type", "pk", "version" (24 hex digits: 10-byte global + 2-byte local, or null),
 * "stored_bytes", "chunks", "record": {fields}} on one line. Exit codes: 0 found, 1 not found or
 * failure, 2 usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "record/record_int.h"

static void help(FILE *f) {
    fprintf(f, "usage: rl get --db URL [--store PREFIX] --pk ID\n"
               "\n"
               "Print the Order with order_id ID as JSON, with its record version.\n");
}

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
    const char *url = NULL, *store = NULL, *pk = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            help(stdout);
            return 0;
        } else if (v && !strcmp(a, "--db")) {
            url = v, i++;
        } else if (v && !strcmp(a, "--store")) {
            store = v, i++;
        } else if (v && !strcmp(a, "--pk")) {
            pk = v, i++;
        } else {
            fprintf(stderr, "rl get: unexpected argument '%s'\n", a);
            help(stderr);
            return 2;
        }
    }
    char *end = NULL;
    long long id = pk ? strtoll(pk, &end, 10) : 0;
    if (!url || !pk || !*pk || *end) {
        help(stderr);
        return 2;
    }
    rl__tool t;
    int rc = rl__tool_open(&t, url, store, 0, 1);
    if (rc) {
        fprintf(stderr, "rl get: %s: %s\n", rl_error_name(rc), rl_record_errmsg());
        return 1;
    }
    rl_buf k, out;
    rl_tuple_packer tp;
    rl_record r = {0};
    rl__buf_init(&k);
    rl__buf_init(&out);
    rl__tuple_packer_init(&tp, &k);
    rl__tuple_pack_int(&tp, id);
    get_ctx c = {t.s, k.data, k.len, &r};
    rc = rl_db_run(t.db, get_fn, &c);
    if (!rc) rc = rl__tool_record_json(&r, &out);
    if (!rc) printf("%s\n", (const char *)out.data);
    else if (rc == RL_E_NOT_FOUND) fprintf(stderr, "rl get: no record with order_id %lld\n", id);
    else fprintf(stderr, "rl get: %s: %s %s\n", rl_error_name(rc), rl_error_message(rc), rl_record_errmsg());
    rl_record_release(&r);
    rl__buf_release(&k);
    rl__buf_release(&out);
    rl__tool_close(&t);
    return rc ? 1 : 0;
}
