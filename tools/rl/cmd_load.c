/* cmd_load.c — `rl load`: load N Order records into a record store, in batched transactions.
 *
 *   rl load [--db URL] [--store PREFIX] --count N [--padding BYTES] [--seed S] [--allow-defects]
 *           [--timeout S]
 *
 * Order ids are 1..N; prices are drawn from the seed (splitmix64, 0..999, duplicates allowed);
 * padding is BYTES bytes (over 100,000 makes split records). The store is created with split long
 * records and record versions (and allow-defects when asked) if it does not exist. A progress bar
 * goes to stderr when it is a terminal. The limits of N and BYTES are RL__TOOL_COUNT_MAX and
 * RL__TOOL_PADDING_MAX (app/tool.h says why). A request waiting for a server is reported on
 * stderr after 3 s, and a batch's transaction gives up after --timeout seconds (default 30) with
 * transaction_timed_out (app/tool.h, rl__tool_wait). Exit codes: 0 done, 1 failure, 2 usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app/args.h"
#include "app/tool.h"

typedef struct {
    rl_store *s;
    int64_t first, n; /* ids first .. first+n-1 */
    uint64_t seed;    /* prices: splitmix stream of (seed, id) */
    uint8_t *pad;
    size_t pad_len;
} batch;

static int load_batch(rl_txn *txn, void *ud) {
    batch *b = ud;
    return rl__tool_save_orders(b->s, txn, b->first, b->n, b->seed, b->pad, b->pad_len);
}

int rl_cmd_load(int argc, char **argv) {
    const char *url = NULL, *store = NULL;
    int64_t count = 0, padding = 0;
    uint64_t seed = 1;
    int allow_defects = 0, code;
    double timeout_s = RL__TOOL_DEFAULT_TIMEOUT_S;
    const rl__arg opts[] = {
        RL__TOOL_OPT_DB(&url),
        {.name = "store",
         .kind = RL_ARG_STRING,
         .dest = &store,
         .metavar = "PREFIX",
         .flags = RL_ARG_NO_DEFAULT,
         .help = "the store's prefix, a JSON array of strings and integers (default '[\"bench\",\"orders\"]')"},
        {.name = "count",
         .kind = RL_ARG_INT64,
         .dest = &count,
         .metavar = "N",
         .flags = RL_ARG_REQUIRED,
         .min = 0,
         .max = RL__TOOL_COUNT_MAX,
         .help = "Orders to load: order_id 1..N"},
        {.name = "padding",
         .kind = RL_ARG_INT64,
         .dest = &padding,
         .metavar = "BYTES",
         .min = 0,
         .max = RL__TOOL_PADDING_MAX,
         .help = "bytes of padding per record (over 100,000 makes split records; the maximum is the largest that "
                 "fits one transaction)"},
        {.name = "seed", .kind = RL_ARG_UINT64, .dest = &seed, .metavar = "S", .help = "seed of the prices"},
        {.name = "allow-defects",
         .kind = RL_ARG_FLAG,
         .dest = &allow_defects,
         .help = "mark a new store so that `rl inject-defect` may corrupt it"},
        RL__TOOL_OPT_TIMEOUT(&timeout_s),
        {0}};
    const rl__args_cmd cmd = {
        .name = "rl load",
        .summary = "Load N Order records (order_id 1..N, prices 0..999 drawn from the seed) into a record store,\n"
                   "creating it (split long records, record versions) if it does not exist. Existing records\n"
                   "with the same order_id are replaced.",
        .epilog = "Exit codes: 0 done, 1 failure, 2 usage.",
        .opts = opts};
    if (rl__args_parse(&cmd, argc, argv, &code)) return code;
    rl__tool_db dbu;
    if (rl__tool_db_choose(&cmd, url, &dbu, &code)) return code;
    url = dbu.url;
    uint32_t flags = RL_STORE_SPLIT_LONG_RECORDS | RL_STORE_RECORD_VERSIONS;
    if (allow_defects) flags |= RL_STORE_ALLOW_DEFECTS;
    rl__tool t;
    const rl__tool_wait wait = {.prog = "rl load", .timeout_ms = rl__tool_wait_ms(timeout_s)};
    int rc = rl__tool_open_with(&t, url, store, flags, 0, &wait);
    if (rc) {
        fprintf(stderr, "rl load: %s (%d): %s\n", rl_error_name(rc), rc, rl__tool_errmsg(&t));
        return 1;
    }
    batch b = {t.s, 1, 0, seed, NULL, (size_t)padding};
    if (padding) {
        b.pad = malloc((size_t)padding);
        if (!b.pad) {
            fprintf(stderr, "rl load: out of memory for %lld bytes of padding\n", (long long)padding);
            rl__tool_close(&t);
            return 1;
        }
        for (int64_t i = 0; i < padding; i++) b.pad[i] = (uint8_t)('a' + i % 26);
    }
    /* Batches stay far below the 10 MB transaction limit. */
    int64_t per = 4000000 / (padding + 200);
    if (per < 1) per = 1;
    if (per > 500) per = 500;
    int tty = isatty(2);
    int64_t done = 0;
    for (; done < count && !rc; done += b.n) {
        b.first = 1 + done;
        b.n = count - done < per ? count - done : per;
        rc = rl_db_run(t.db, load_batch, &b);
        if (tty && !rc) {
            int64_t now = done + b.n, w = 40, fill = count ? now * w / count : w;
            fprintf(stderr, "\r[%.*s%*s] %lld/%lld", (int)fill, "########################################",
                    (int)(w - fill), "", (long long)now, (long long)count);
        }
    }
    if (tty) fprintf(stderr, "\n");
    free(b.pad);
    char why[RL__ERRDETAIL_CAP]; /* the store's detail outlives the store */
    snprintf(why, sizeof why, "%s", rl_store_errmsg(t.s));
    rl__tool_close(&t);
    if (rc == RL_E_TRANSACTION_TOO_LARGE) {
        fprintf(stderr,
                "rl load: %s: an Order with %lld bytes of padding does not fit one transaction with this "
                "store prefix (order_id %lld; %lld records loaded before it)\n",
                rl_error_name(rc), (long long)padding, (long long)b.first, (long long)(b.first - 1));
        return 1;
    }
    if (rc) {
        fprintf(stderr, "rl load: %s (%d): %s %s (%lld records loaded before the failing batch)\n", rl_error_name(rc),
                rc, rl_error_message(rc), why, (long long)(b.first - 1));
        return 1;
    }
    printf("loaded %lld records\n", (long long)count);
    return 0;
}
