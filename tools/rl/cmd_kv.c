/* cmd_kv.c — `rl kv`: read and write raw keys of a database through the public KV API.
 *
 *   rl kv [--db URL] [--tuple] [--system] [--timeout S] COMMAND ARGS...
 *     get KEY | set KEY VALUE | clear KEY | clearrange BEGIN END
 *     range BEGIN END [--limit N] [--reverse] | getkey FORM KEY [OFFSET] | status | watch KEY
 *     size BEGIN END | split BEGIN END CHUNK
 *
 * Without --db the database is RL_DB's, else ./reclayer.cluster's (rl__tool_db_find, app/tool.h).
 * Keys and values are in FoundationDB's printable escape form (\xNN, \\); with --tuple, keys are
 * JSON tuple arrays (the form of `rl tuple`) and printed keys that decode as tuples are shown the
 * same way. Exit codes: 0 success, 1 an error (its name and message on stderr) or a key not
 * found, 2 usage. get, range, getkey, status, size and split open the database read-only (no
 * file is changed). size prints the estimated bytes of [BEGIN, END), split the keys that cut it
 * into chunks of about CHUNK bytes, one per line (docs/design.md §4, "Size estimates"). A request waiting for a server is reported on stderr after 3 s, and the transaction
 * gives up after --timeout seconds (default 30) with transaction_timed_out (app/tool.h,
 * rl__tool_wait). `watch` sets a watch (rl_txn_watch), waits for the key's value to change —
 * at most --timeout seconds when given (then transaction_timed_out, exit 1), else for ever —
 * and prints the new value (a cleared key: nothing, and "cleared" on stderr; exit 0 either way).
 * All logic is in src/kv; this file parses arguments and prints.
 */
#include <pthread.h>
#include <time.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "app/args.h"
#include "base/buf.h"
#include "base/bytes.h"
#include "app/tool.h"
#include "reclayer/kv.h"
#include "reclayer/tuple.h"

typedef struct {
    int tuple;
    int system;
} kv_opts;

/* Parse argument s (named what, e.g. "KEY") of command cmd into out: FoundationDB's printable
 * form, or a JSON tuple with --tuple (is_key and o->tuple). RL_OK, or RL_ARGS_USAGE after
 * printing a message that names the argument and says what is wrong. */
static int parse_arg(const rl__args_cmd *cmd, const kv_opts *o, int is_key, const char *what, const char *s,
                     rl_buf *out) {
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    if (!is_key || !o->tuple) {
        int rc = rl__args_unescape(s, out, &msg);
        if (rc == RL_E_INVALID_ARGUMENT) return rl__args_usage_error(cmd, "%s: %s", what, rl__errdetail_get(&msg));
        if (rc) return rl__args_usage_error(cmd, "%s: %s", what, rl_error_message(rc));
        return RL_OK;
    }
    uint8_t *enc = NULL;
    size_t n = 0;
    int rc = rl_tuple_from_json(s, &enc, &n);
    if (rc) {
        const char *d = rl_last_error_detail();
        return rl__args_usage_error(cmd, "%s: not a JSON tuple array (see `rl tuple --help`): %s%s%s", what,
                                    rl_error_name(rc), *d ? ": " : "", d);
    }
    rl__buf_append(out, enc, n);
    rl_free(enc);
    if ((rc = rl__buf_error(out)) != RL_OK) return rl__args_usage_error(cmd, "%s: %s", what, rl_error_message(rc));
    return RL_OK;
}

static void print_key(const kv_opts *o, const uint8_t *k, size_t n) {
    if (o->tuple) {
        char *s = NULL;
        if (rl_tuple_to_json(k, n, &s) == RL_OK) {
            fputs(s, stdout);
            rl_free(s);
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

enum { C_GET, C_SET, C_CLEAR, C_CLEARRANGE, C_RANGE, C_GETKEY, C_STATUS, C_SIZE, C_SPLIT, C_WATCH };

/* Waiting for a watch with a timeout: its callback signals. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int ready;
} watch_wait;

static void on_watch(rl_future *f, void *ud) {
    (void)f;
    watch_wait *ww = ud;
    pthread_mutex_lock(&ww->mu);
    ww->ready = 1;
    pthread_cond_broadcast(&ww->cv);
    pthread_mutex_unlock(&ww->mu);
}

/* Wait for watch f at most timeout_s seconds (0: for ever), then free it (a pending watch is
 * cancelled, and its callback has returned once rl_future_free has). RL_OK or f's error once it
 * is ready, RL_E_TRANSACTION_TIMED_OUT when the time passed first. */
static int wait_watch(rl_future *f, double timeout_s) {
    if (timeout_s <= 0) {
        int rc = rl_future_wait(f);
        rl_future_free(f);
        return rc;
    }
    watch_wait ww = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    int rc = rl_future_set_callback(f, on_watch, &ww);
    if (rc) {
        rl_future_free(f);
        return rc;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double end = (double)ts.tv_sec + ts.tv_nsec / 1e9 + timeout_s;
    ts.tv_sec = (time_t)end;
    ts.tv_nsec = (long)((end - (double)ts.tv_sec) * 1e9);
    pthread_mutex_lock(&ww.mu);
    int wr = 0;
    while (!ww.ready && wr == 0) wr = pthread_cond_timedwait(&ww.cv, &ww.mu, &ts);
    int ready = ww.ready;
    pthread_mutex_unlock(&ww.mu);
    rc = ready ? rl_future_get_error(f) : RL_E_TRANSACTION_TIMED_OUT;
    rl_future_free(f); /* before ww goes: no callback runs (or still runs) after it */
    return rc;
}
enum { F_FGE, F_FGT, F_LLE, F_LLT };

int rl_cmd_kv(int argc, char **argv) {
    kv_opts o = {0, 0};
    const char *url = NULL;
    const char *a1 = NULL, *a2 = NULL;
    int limit = 0, reverse = 0, form = 0, offset = 0, which = -1, code;
    int64_t chunk = 0;
    double timeout_s = -1; /* not given: RL__TOOL_DEFAULT_TIMEOUT_S, but for watch (none) */
    static const rl__arg_choice forms[] = {{"first_greater_or_equal", F_FGE},
                                           {"fge", F_FGE},
                                           {"first_greater_than", F_FGT},
                                           {"fgt", F_FGT},
                                           {"last_less_or_equal", F_LLE},
                                           {"lle", F_LLE},
                                           {"last_less_than", F_LLT},
                                           {"llt", F_LLT},
                                           {NULL, 0}};
    const rl__arg opts[] = {
        RL__TOOL_OPT_DB_HELP(&url, "the database: file:DIR (durable, DIR must exist), cluster:FILE, fdb:FILE, or "
                                   "mem: (empty, in memory, discarded at exit)"),
        {.name = "tuple",
         .kind = RL_ARG_FLAG,
         .dest = &o.tuple,
         .help = "KEY, BEGIN and END are JSON tuple arrays, e.g. '[{\"string\":\"a\"},{\"int\":\"1\"}]' (see "
                 "`rl tuple --help`); keys are printed the same way when they decode"},
        {.name = "system",
         .kind = RL_ARG_FLAG,
         .dest = &o.system,
         .help = "allow keys beginning with \\xff (the system keyspace)"},
        RL__TOOL_OPT_TIMEOUT(&timeout_s),
        {0}};
    const rl__arg key_pos[] = {{.name = "KEY", .kind = RL_ARG_STRING, .dest = &a1, .help = "the key"}, {0}};
    const rl__arg set_pos[] = {
        {.name = "KEY", .kind = RL_ARG_STRING, .dest = &a1, .help = "the key"},
        {.name = "VALUE", .kind = RL_ARG_STRING, .dest = &a2, .help = "the value (printable form)"},
        {0}};
    const rl__arg range_pos[] = {{.name = "BEGIN", .kind = RL_ARG_STRING, .dest = &a1, .help = "the first key"},
                                 {.name = "END", .kind = RL_ARG_STRING, .dest = &a2, .help = "the key after the last"},
                                 {0}};
    const rl__arg range_opts[] = {
        {.name = "limit",
         .kind = RL_ARG_INT,
         .dest = &limit,
         .min = 0,
         .max = 1000000000,
         .help = "at most N rows (0: all)"},
        {.name = "reverse", .kind = RL_ARG_FLAG, .dest = &reverse, .help = "in descending key order"},
        {0}};
    const rl__arg split_pos[] = {{.name = "BEGIN", .kind = RL_ARG_STRING, .dest = &a1, .help = "the first key"},
                                 {.name = "END", .kind = RL_ARG_STRING, .dest = &a2, .help = "the key after the last"},
                                 {.name = "CHUNK",
                                  .kind = RL_ARG_INT64,
                                  .dest = &chunk,
                                  .min = 1,
                                  .max = INT64_MAX,
                                  .help = "bytes per chunk, about"},
                                 {0}};
    const rl__arg getkey_pos[] = {
        {.name = "FORM", .kind = RL_ARG_ENUM, .dest = &form, .choices = forms, .help = "the selector's form"},
        {.name = "KEY", .kind = RL_ARG_STRING, .dest = &a1, .help = "its key"},
        {.name = "OFFSET",
         .kind = RL_ARG_INT,
         .dest = &offset,
         .flags = RL_ARG_OPTIONAL,
         .min = -1000000,
         .max = 1000000,
         .help = "moves further (default 0)"},
        {0}};
    const rl__args_cmd get = {
        .name = "rl kv get", .brief = "print the value of KEY (exit 1 if it is not set)", .pos = key_pos};
    const rl__args_cmd set = {.name = "rl kv set", .brief = "set KEY to VALUE", .pos = set_pos};
    const rl__args_cmd clear = {.name = "rl kv clear", .brief = "clear KEY", .pos = key_pos};
    const rl__args_cmd clearrange = {
        .name = "rl kv clearrange", .brief = "clear every key in [BEGIN, END)", .pos = range_pos};
    const rl__args_cmd range = {.name = "rl kv range",
                                .brief = "print the keys and values in [BEGIN, END), one per line as KEY<TAB>VALUE",
                                .opts = range_opts,
                                .pos = range_pos};
    const rl__args_cmd getkey = {.name = "rl kv getkey",
                                 .brief = "resolve a key selector and print the key; FORM is first_greater_or_equal "
                                          "(fge), first_greater_than (fgt), last_less_or_equal (lle) or last_less_than "
                                          "(llt); OFFSET moves further",
                                 .pos = getkey_pos};
    const rl__args_cmd status = {.name = "rl kv status",
                                 .brief =
                                     "print the database status as JSON (versions, sizes, log and checkpoint state)"};
    const rl__args_cmd size = {.name = "rl kv size",
                               .brief = "print the estimated bytes (keys + values) of [BEGIN, END), from the "
                                        "storage servers' byte samples (FoundationDB's getEstimatedRangeSizeBytes)",
                               .pos = range_pos};
    const rl__args_cmd split = {.name = "rl kv split",
                                .brief = "print the keys that split [BEGIN, END) into chunks of about CHUNK bytes, "
                                         "one per line, BEGIN and END included (FoundationDB's getRangeSplitPoints)",
                                .pos = split_pos};
    const rl__args_cmd watch = {.name = "rl kv watch",
                                .brief = "wait until the value of KEY changes (FoundationDB's watch), then print "
                                         "the new value (nothing for a cleared key); --timeout S gives up after S "
                                         "seconds with transaction_timed_out (exit 1), without it the wait has no end",
                                .pos = key_pos};
    const rl__args_cmd *subs[] = {&get,    &set,  &clear, &clearrange, &range, &getkey,
                                  &status, &size, &split, &watch,      NULL};
    const rl__args_cmd cmd = {
        .name = "rl kv",
        .summary = "Read and write raw keys of a reclayer database (one transaction per command).",
        .epilog = "Keys and values use FoundationDB's printable form: printable ASCII as is, \\\\ for a\n"
                  "backslash, \\xNN for any other byte. A key beginning with -- goes after a -- word\n"
                  "(rl kv get -- --key). Exit codes: 0 success, 1 error or not found, 2 usage.",
        .opts = opts,
        .subs = subs,
        .sub_dest = &which};
    if (rl__args_parse(&cmd, argc, argv, &code)) return code;
    const rl__args_cmd *sub = subs[which];
    double watch_s = which == C_WATCH && timeout_s > 0 ? timeout_s : 0; /* how long a watch waits */
    if (timeout_s < 0) timeout_s = which == C_WATCH ? 0 : RL__TOOL_DEFAULT_TIMEOUT_S;
    /* Parse the arguments before opening anything. */
    rl_buf k1, k2;
    rl__buf_init(&k1);
    rl__buf_init(&k2);
    int rc = RL_OK, exit_code = 0;
    rl_db *db = NULL;
    rl_txn *t = NULL;
    if (a1)
        rc = parse_arg(sub, &o, 1,
                       which == C_GET || which == C_CLEAR || which == C_GETKEY || which == C_SET || which == C_WATCH
                           ? "KEY"
                           : "BEGIN",
                       a1, &k1);
    if (!rc && a2) rc = parse_arg(sub, &o, which != C_SET, which == C_SET ? "VALUE" : "END", a2, &k2);
    if (rc) {
        exit_code = RL_ARGS_USAGE;
        goto done;
    }
    /* The database once the arguments are known to be good (a bad key is named whatever the
     * database). */
    rl__tool_db dbu;
    if (rl__tool_db_choose(&cmd, url, &dbu, &code)) {
        exit_code = code;
        goto done;
    }
    url = dbu.url;
    /* The commands that only read open the database read-only: they never change a file. */
    rl_db_options dbo;
    memset(&dbo, 0, sizeof dbo);
    dbo.size = sizeof dbo;
    dbo.read_only = which == C_GET || which == C_RANGE || which == C_GETKEY || which == C_STATUS || which == C_SIZE ||
                    which == C_SPLIT;
    const rl__tool_wait w = {.prog = "rl kv", .timeout_ms = rl__tool_wait_ms(timeout_s)};
    rl__tool_db_options(&dbo, &w);
    rc = rl_db_open(url, &dbo, &db);
    if (rc) {
        fprintf(stderr, "rl kv: cannot open %s: %s (%d): %s\n", url, rl_error_name(rc), rc, rl_last_error_detail());
        exit_code = 1;
        goto done;
    }
    if (which == C_STATUS) {
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
    /* One transaction, retried as rl_db_run retries (rl_txn_on_error: backoff, and
     * transaction_timed_out once --timeout has passed); here rather than through rl_db_run so
     * that the committed version can be printed. */
    rl_future *f = NULL;
    for (;;) {
        rl_future_free(f);
        f = NULL;
        if (which == C_GET) {
            f = rl_txn_get(t, k1.data, k1.len, 0);
        } else if (which == C_SET || which == C_CLEAR || which == C_CLEARRANGE) {
            if (which == C_SET) rc = rl_txn_set(t, k1.data, k1.len, k2.data, k2.len);
            else if (which == C_CLEAR) rc = rl_txn_clear(t, k1.data, k1.len);
            else rc = rl_txn_clear_range(t, k1.data, k1.len, k2.data, k2.len);
            if (rc) break; /* a bad write: not retryable */
            f = rl_txn_commit(t);
        } else if (which == C_WATCH) {
            /* Set the watch (registered by the commit), wait for the change, read the value. */
            rl_future *wf = rl_txn_watch(t, k1.data, k1.len);
            f = rl_txn_commit(t);
            rc = rl_future_wait(f);
            rc = rc == RL_OK ? wait_watch(wf, watch_s) : (rl_future_free(wf), rc);
            if (rc == RL_OK) {
                rl_txn_reset(t);
                rl_future_free(f);
                f = rl_txn_get(t, k1.data, k1.len, 0);
                rc = rl_future_wait(f);
            }
            if (rc == RL_OK || rc == RL_E_TRANSACTION_TIMED_OUT || (rc = rl__tool_retry(t, rc)) != RL_OK) break;
            continue;
        } else if (which == C_RANGE) {
            f = rl_txn_get_range(t, RL_FIRST_GREATER_OR_EQUAL(k1.data, k1.len),
                                 RL_FIRST_GREATER_OR_EQUAL(k2.data, k2.len), (int)limit, 0, RL_STREAMING_WANT_ALL, 0,
                                 reverse ? RL_REVERSE : 0);
        } else if (which == C_SIZE) {
            f = rl_txn_get_estimated_range_size_bytes(t, k1.data, k1.len, k2.data, k2.len);
        } else if (which == C_SPLIT) {
            f = rl_txn_get_range_split_points(t, k1.data, k1.len, k2.data, k2.len, chunk);
        } else { /* getkey */
            rl_key_selector sel;
            if (form == F_FGE) sel = RL_FIRST_GREATER_OR_EQUAL(k1.data, k1.len);
            else if (form == F_FGT) sel = RL_FIRST_GREATER_THAN(k1.data, k1.len);
            else if (form == F_LLE) sel = RL_LAST_LESS_OR_EQUAL(k1.data, k1.len);
            else sel = RL_LAST_LESS_THAN(k1.data, k1.len);
            sel.offset += offset;
            f = rl_txn_get_key(t, sel, 0);
        }
        rc = rl_future_wait(f);
        if (rc == RL_OK || (rc = rl__tool_retry(t, rc)) != RL_OK) break;
    }
    if (which == C_WATCH) {
        int present = 0, len = 0;
        const uint8_t *v = NULL;
        if (rc == RL_OK) rc = rl_future_get_value(f, &present, &v, &len);
        if (rc) {
            exit_code = fail(rc, "watch");
        } else if (!present) {
            fprintf(stderr, "rl kv: '%s': cleared\n", a1);
        } else {
            print_value(v, (size_t)len);
            putchar('\n');
        }
    } else if (which == C_GET) {
        int present = 0, len = 0;
        const uint8_t *v = NULL;
        if (rc == RL_OK) rc = rl_future_get_value(f, &present, &v, &len);
        if (rc) {
            exit_code = fail(rc, "get");
        } else if (!present) {
            fprintf(stderr, "rl kv: '%s': not found\n", a1);
            exit_code = 1;
        } else {
            print_value(v, (size_t)len);
            putchar('\n');
        }
    } else if (which == C_SET || which == C_CLEAR || which == C_CLEARRANGE) {
        int64_t v = -1;
        if (rc) {
            exit_code = fail(rc, f ? "commit" : sub->name + 6);
        } else {
            rl_txn_get_committed_version(t, &v);
            printf("committed at version %lld\n", (long long)v);
        }
    } else if (which == C_RANGE) {
        const rl_keyvalue *kvs;
        int n = 0, more = 0;
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
    } else if (which == C_SIZE) {
        int64_t v = 0;
        if (rc == RL_OK) rc = rl_future_get_int64(f, &v);
        if (rc) exit_code = fail(rc, "size");
        else printf("%lld\n", (long long)v);
    } else if (which == C_SPLIT) {
        const rl_slice *keys;
        int n = 0;
        if (rc == RL_OK) rc = rl_future_get_key_array(f, &keys, &n);
        if (rc) {
            exit_code = fail(rc, "split");
        } else {
            for (int i = 0; i < n; i++) {
                print_key(&o, keys[i].data, keys[i].len);
                putchar('\n');
            }
        }
    } else {
        const uint8_t *k = NULL;
        int kl = 0;
        if (rc == RL_OK) rc = rl_future_get_key(f, &k, &kl);
        if (rc) {
            exit_code = fail(rc, "getkey");
        } else {
            print_key(&o, k, (size_t)kl);
            putchar('\n');
        }
    }
    rl_future_free(f);
done:
    rl_txn_free(t);
    rl_db_close(db);
    rl__buf_release(&k1);
    rl__buf_release(&k2);
    return exit_code;
}
