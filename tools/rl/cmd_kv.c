/* cmd_kv.c — `rl kv`: read and write raw keys of a database through the public KV API.
 *
 *   rl kv [--db URL] [--tuple] [--system] COMMAND ARGS...
 *     get KEY | set KEY VALUE | clear KEY | clearrange BEGIN END
 *     range BEGIN END [--limit N] [--reverse] | getkey FORM KEY [OFFSET] | status
 *
 * Keys and values are in FoundationDB's printable escape form (\xNN, \\); with --tuple, keys are
 * JSON tuple arrays (the form of `rl tuple`) and printed keys that decode as tuples are shown the
 * same way. Exit codes: 0 success, 1 an error (its name and message on stderr) or a key not
 * found, 2 usage. All logic is in src/kv; this file parses arguments and prints.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/bytes.h"
#include "reclayer/kv.h"
#include "tuple/tuple_json.h"

static void help(FILE *f) {
    fprintf(f,
            "usage: rl kv [--db URL] [--tuple] [--system] COMMAND ARGS...\n"
            "\n"
            "Read and write raw keys of a reclayer database (one transaction per command).\n"
            "\n"
            "commands:\n"
            "  get KEY                 print the value of KEY (exit 1 if it is not set)\n"
            "  set KEY VALUE           set KEY to VALUE\n"
            "  clear KEY               clear KEY\n"
            "  clearrange BEGIN END    clear every key in [BEGIN, END)\n"
            "  range BEGIN END         print the keys and values in [BEGIN, END), one per line\n"
            "                          as KEY<TAB>VALUE; --limit N rows, --reverse last key first\n"
            "  getkey FORM KEY [OFFSET]  resolve a key selector and print the key; FORM is\n"
            "                          first_greater_or_equal (fge), first_greater_than (fgt),\n"
            "                          last_less_or_equal (lle) or last_less_than (llt); OFFSET\n"
            "                          moves further (default 0)\n"
            "  status                  print the database status as JSON (versions, sizes, log\n"
            "                          and checkpoint state)\n"
            "\n"
            "options:\n"
            "  --db URL      mem: (default; empty, in memory), file:DIR (durable, DIR must exist),\n"
            "                cluster:FILE, fdb:FILE; the RL_DB environment variable sets the default\n"
            "  --tuple       KEY, BEGIN and END are JSON tuple arrays, e.g. '[{\"string\":\"a\"},{\"int\":\"1\"}]'\n"
            "                (see `rl tuple --help`); keys are printed the same way when they decode\n"
            "  --system      allow keys beginning with \\xff (the system keyspace)\n"
            "  --limit N     range: at most N rows\n"
            "  --reverse     range: in descending key order\n"
            "\n"
            "Keys and values use FoundationDB's printable form: printable ASCII as is, \\\\ for a\n"
            "backslash, \\xNN for any other byte. Exit codes: 0 success, 1 error or not found,\n"
            "2 usage.\n");
}

typedef struct {
    int tuple;
    int system;
} kv_opts;

/* Parse a key argument into out (printable form, or a JSON tuple with --tuple). */
static int parse_key(const kv_opts *o, const char *s, rl_buf *out) {
    if (!o->tuple) return rl__bytes_unprintable(out, s);
    json_error_t jerr;
    json_t *j = json_loads(s, 0, &jerr);
    if (!j) {
        fprintf(stderr, "rl kv: '%s' is not JSON: %s\n", s, jerr.text);
        return RL_E_USAGE;
    }
    int rc = rl__tuple_from_json(j, out);
    json_decref(j);
    return rc;
}

static void print_key(const kv_opts *o, const uint8_t *k, size_t n) {
    if (o->tuple) {
        json_t *j = NULL;
        if (rl__tuple_to_json(k, n, &j) == RL_OK && j) {
            char *s = json_dumps(j, JSON_COMPACT);
            if (s) fputs(s, stdout);
            free(s);
            json_decref(j);
            return;
        }
    }
    rl_buf b;
    rl__buf_init(&b);
    rl__bytes_printable(&b, k, n);
    fwrite(b.data, 1, b.len, stdout);
    rl__buf_release(&b);
}

static void print_value(const uint8_t *v, size_t n) {
    rl_buf b;
    rl__buf_init(&b);
    rl__bytes_printable(&b, v, n);
    fwrite(b.data, 1, b.len, stdout);
    rl__buf_release(&b);
}

static int fail(int rc, const char *what) {
    fprintf(stderr, "rl kv: %s: %s (%d): %s\n", what, rl_error_name(rc), rc, rl_error_message(rc));
    return 1;
}

static int commit(rl_txn *t) {
    rl_future *f = rl_txn_commit(t);
    int rc = rl_future_wait(f);
    rl_future_free(f);
    if (rc) return fail(rc, "commit");
    int64_t v = -1;
    rl_txn_get_committed_version(t, &v);
    printf("committed at version %lld\n", (long long)v);
    return 0;
}

int rl_cmd_kv(int argc, char **argv) {
    kv_opts o = {0, 0};
    const char *url = getenv("RL_DB");
    if (!url || !*url) url = "mem:";
    long limit = 0;
    int reverse = 0;
    const char *pos[8];
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            help(stdout);
            return 0;
        } else if (!strcmp(a, "--db") && i + 1 < argc) {
            url = argv[++i];
        } else if (!strcmp(a, "--tuple")) {
            o.tuple = 1;
        } else if (!strcmp(a, "--system")) {
            o.system = 1;
        } else if (!strcmp(a, "--reverse")) {
            reverse = 1;
        } else if (!strcmp(a, "--limit") && i + 1 < argc) {
            char *end;
            limit = strtol(argv[++i], &end, 10);
            if (*end || limit < 0 || limit > 1000000000L) {
                fprintf(stderr, "rl kv: bad --limit '%s'\n", argv[i]);
                return 2;
            }
        } else if (a[0] == '-' && a[1] == '-') {
            fprintf(stderr, "rl kv: unknown option '%s'\n", a);
            help(stderr);
            return 2;
        } else if (npos < 8) {
            pos[npos++] = a;
        } else {
            help(stderr);
            return 2;
        }
    }
    if (npos == 0) {
        help(stderr);
        return 2;
    }
    const char *cmd = pos[0];
    struct {
        const char *name;
        int min, max;
    } arity[] = {{"get", 2, 2},   {"set", 3, 3},        {"clear", 2, 2}, {"clearrange", 3, 3},
                 {"range", 3, 3}, {"getkey", 3, 4},     {"status", 1, 1}};
    int known = 0;
    for (size_t i = 0; i < sizeof arity / sizeof arity[0]; i++)
        if (!strcmp(cmd, arity[i].name)) {
            known = 1;
            if (npos < arity[i].min || npos > arity[i].max) {
                fprintf(stderr, "rl kv %s: wrong number of arguments\n", cmd);
                help(stderr);
                return 2;
            }
        }
    if (!known) {
        fprintf(stderr, "rl kv: unknown command '%s'\n", cmd);
        help(stderr);
        return 2;
    }
    /* Parse the arguments before opening anything. */
    rl_buf k1, k2;
    rl__buf_init(&k1);
    rl__buf_init(&k2);
    int rc = RL_OK, exit_code = 0;
    rl_db *db = NULL;
    rl_txn *t = NULL;
    if (npos >= 2 && strcmp(cmd, "getkey")) rc = parse_key(&o, pos[1], &k1);
    if (rc == RL_OK && npos >= 3 && !strcmp(cmd, "set")) rc = rl__bytes_unprintable(&k2, pos[2]);
    else if (rc == RL_OK && npos >= 3 && strcmp(cmd, "getkey")) rc = parse_key(&o, pos[2], &k2);
    else if (rc == RL_OK && !strcmp(cmd, "getkey")) rc = parse_key(&o, pos[2], &k1);
    if (rc) {
        if (rc != RL_E_USAGE) fprintf(stderr, "rl kv: bad key or value: %s\n", rl_error_message(rc));
        exit_code = 2;
        goto done;
    }
    rc = rl_db_open(url, NULL, &db);
    if (rc) {
        fprintf(stderr, "rl kv: cannot open %s: %s (%d): %s\n", url, rl_error_name(rc), rc,
                rl_last_error_detail());
        exit_code = 1;
        goto done;
    }
    if (!strcmp(cmd, "status")) {
        char *js = NULL;
        rc = rl_db_status_json(db, &js);
        if (rc) {
            exit_code = fail(rc, "status");
        } else {
            printf("%s\n", js);
            rl_free(js);
        }
        goto done;
    }
    rc = rl_txn_begin(db, &t);
    if (rc == RL_OK && o.system) rc = rl_txn_set_option(t, RL_TXN_OPT_ACCESS_SYSTEM_KEYS, 0);
    if (rc) {
        exit_code = fail(rc, "begin");
        goto done;
    }
    if (!strcmp(cmd, "get")) {
        rl_future *f = rl_txn_get(t, k1.data, k1.len, 0);
        int present = 0, len = 0;
        const uint8_t *v = NULL;
        rc = rl_future_wait(f);
        if (rc == RL_OK) rc = rl_future_get_value(f, &present, &v, &len);
        if (rc) {
            exit_code = fail(rc, "get");
        } else if (!present) {
            fprintf(stderr, "rl kv: '%s': not found\n", pos[1]);
            exit_code = 1;
        } else {
            print_value(v, (size_t)len);
            putchar('\n');
        }
        rl_future_free(f);
    } else if (!strcmp(cmd, "set") || !strcmp(cmd, "clear") || !strcmp(cmd, "clearrange")) {
        if (!strcmp(cmd, "set"))
            rc = rl_txn_set(t, k1.data, k1.len, k2.data, k2.len);
        else if (!strcmp(cmd, "clear"))
            rc = rl_txn_clear(t, k1.data, k1.len);
        else
            rc = rl_txn_clear_range(t, k1.data, k1.len, k2.data, k2.len);
        exit_code = rc ? fail(rc, cmd) : commit(t);
    } else if (!strcmp(cmd, "range")) {
        rl_future *f = rl_txn_get_range(t, RL_FIRST_GREATER_OR_EQUAL(k1.data, k1.len),
                                        RL_FIRST_GREATER_OR_EQUAL(k2.data, k2.len), (int)limit, 0,
                                        RL_STREAMING_WANT_ALL, 0, reverse ? RL_REVERSE : 0);
        const rl_keyvalue *kvs;
        int n = 0, more = 0;
        rc = rl_future_wait(f);
        if (rc == RL_OK) rc = rl_future_get_keyvalue_array(f, &kvs, &n, &more);
        if (rc) {
            exit_code = fail(rc, "range");
        } else {
            for (int i = 0; i < n; i++) {
                print_key(&o, kvs[i].key, kvs[i].key_len);
                putchar('\t');
                print_value(kvs[i].value, kvs[i].value_len);
                putchar('\n');
            }
            if (more) fprintf(stderr, "(more rows beyond the limit)\n");
        }
        rl_future_free(f);
    } else { /* getkey */
        const char *form = pos[1];
        rl_key_selector sel;
        if (!strcmp(form, "first_greater_or_equal") || !strcmp(form, "fge"))
            sel = RL_FIRST_GREATER_OR_EQUAL(k1.data, k1.len);
        else if (!strcmp(form, "first_greater_than") || !strcmp(form, "fgt"))
            sel = RL_FIRST_GREATER_THAN(k1.data, k1.len);
        else if (!strcmp(form, "last_less_or_equal") || !strcmp(form, "lle"))
            sel = RL_LAST_LESS_OR_EQUAL(k1.data, k1.len);
        else if (!strcmp(form, "last_less_than") || !strcmp(form, "llt"))
            sel = RL_LAST_LESS_THAN(k1.data, k1.len);
        else {
            fprintf(stderr, "rl kv getkey: unknown selector form '%s'\n", form);
            exit_code = 2;
            goto done;
        }
        if (npos == 4) {
            char *end;
            long off = strtol(pos[3], &end, 10);
            if (*end || off < -1000000 || off > 1000000) {
                fprintf(stderr, "rl kv getkey: bad offset '%s'\n", pos[3]);
                exit_code = 2;
                goto done;
            }
            sel.offset += (int)off;
        }
        rl_future *f = rl_txn_get_key(t, sel, 0);
        const uint8_t *k = NULL;
        int kl = 0;
        rc = rl_future_wait(f);
        if (rc == RL_OK) rc = rl_future_get_key(f, &k, &kl);
        if (rc) {
            exit_code = fail(rc, "getkey");
        } else {
            print_key(&o, k, (size_t)kl);
            putchar('\n');
        }
        rl_future_free(f);
    }
done:
    rl_txn_free(t);
    rl_db_close(db);
    rl__buf_release(&k1);
    rl__buf_release(&k2);
    return exit_code;
}
