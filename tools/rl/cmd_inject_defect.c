/* cmd_inject_defect.c — `rl inject-defect`: corrupt one record of a store on purpose, to test
 * the integrity checker.
 *
 *   rl inject-defect --db URL [--store PREFIX] --pk ID --kind delete-chunk|stray-suffix|version-key [--force]
 *
 * Refused (exit 1) unless the store was created by `rl load --allow-defects` or --force is given.
 * delete-chunk clears the record's first chunk (its only value when stored whole); stray-suffix
 * adds the key (1, ID, "stray"); version-key leaves only the record's version key. Exit codes:
 * 0 done, 1 refused or failure, 2 usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "record/record_int.h"

static void help(FILE *f) {
    fprintf(f, "usage: rl inject-defect --db URL [--store PREFIX] --pk ID --kind KIND [--force]\n"
               "\n"
               "Corrupt the Order with order_id ID on purpose. KIND: delete-chunk, stray-suffix,\n"
               "version-key. Only for stores loaded with --allow-defects, unless --force.\n");
}

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
    const char *url = NULL, *store = NULL, *pk = NULL, *kind = NULL;
    int flags = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            help(stdout);
            return 0;
        } else if (!strcmp(a, "--force")) {
            flags |= RL_DEFECT_FORCE;
        } else if (v && !strcmp(a, "--db")) {
            url = v, i++;
        } else if (v && !strcmp(a, "--store")) {
            store = v, i++;
        } else if (v && !strcmp(a, "--pk")) {
            pk = v, i++;
        } else if (v && !strcmp(a, "--kind")) {
            kind = v, i++;
        } else {
            fprintf(stderr, "rl inject-defect: unexpected argument '%s'\n", a);
            help(stderr);
            return 2;
        }
    }
    rl_defect_kind k = 0;
    if (kind && !strcmp(kind, "delete-chunk")) k = RL_DEFECT_DELETE_CHUNK;
    else if (kind && !strcmp(kind, "stray-suffix")) k = RL_DEFECT_STRAY_SUFFIX;
    else if (kind && !strcmp(kind, "version-key")) k = RL_DEFECT_VERSION_KEY;
    char *end = NULL;
    long long id = pk ? strtoll(pk, &end, 10) : 0;
    if (!url || !pk || !*pk || *end || !k) {
        help(stderr);
        return 2;
    }
    rl__tool t;
    int rc = rl__tool_open(&t, url, store, 0, 1);
    if (rc) {
        fprintf(stderr, "rl inject-defect: %s: %s\n", rl_error_name(rc), rl_record_errmsg());
        return 1;
    }
    rl_buf kb;
    rl_tuple_packer tp;
    rl__buf_init(&kb);
    rl__tuple_packer_init(&tp, &kb);
    rl__tuple_pack_int(&tp, id);
    inject_ctx c = {t.s, kb.data, kb.len, k, flags};
    rc = rl_db_run(t.db, inject_fn, &c);
    if (rc == RL_E_CLIENT_INVALID_OPERATION)
        fprintf(stderr, "rl inject-defect: refused: %s\n", rl_record_errmsg());
    else if (rc == RL_E_NOT_FOUND)
        fprintf(stderr, "rl inject-defect: no record with order_id %lld\n", id);
    else if (rc)
        fprintf(stderr, "rl inject-defect: %s: %s %s\n", rl_error_name(rc), rl_error_message(rc), rl_record_errmsg());
    else
        printf("injected %s into order_id %lld\n", kind, id);
    rl__buf_release(&kb);
    rl__tool_close(&t);
    return rc ? 1 : 0;
}
