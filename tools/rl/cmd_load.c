/* cmd_load.c — `rl load`: load N Order records into a record store, in batched transactions.
 *
 *   rl load --db URL [--store PREFIX] --count N [--padding BYTES] [--seed S] [--allow-defects]
 *
 * Order ids are 1..N; prices are drawn from the seed (splitmix64, 0..999, duplicates allowed);
 * padding is BYTES bytes (over 100,000 makes split records). The store is created with split long
 * records and record versions (and allow-defects when asked) if it does not exist. A progress bar
 * goes to stderr when it is a terminal. Exit codes: 0 done, 1 failure, 2 usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "order.pb-c.h"
#include "record/record_int.h"

static void help(FILE *f) {
    fprintf(f, "usage: rl load --db URL [--store PREFIX] --count N [--padding BYTES] [--seed S] [--allow-defects]\n"
               "\n"
               "Load N Order records (order_id 1..N, prices drawn from the seed) into a record store.\n"
               "PREFIX is a JSON array of strings and integers, default '[\"bench\",\"orders\"]'.\n"
               "--allow-defects marks a new store so that `rl inject-defect` may corrupt it.\n");
}

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

typedef struct {
    rl_store *s;
    int64_t first, n;   /* ids first .. first+n-1 */
    uint64_t seed;      /* prices: splitmix stream of (seed, id) */
    uint8_t *pad;
    size_t pad_len;
} batch;

static int load_batch(rl_txn *txn, void *ud) {
    batch *b = ud;
    for (int64_t id = b->first; id < b->first + b->n; id++) {
        uint64_t st = b->seed ^ ((uint64_t)id * 0x2545f4914f6cdd1dull);
        char customer[32];
        Reclayer__Order o = RECLAYER__ORDER__INIT;
        o.has_order_id = 1, o.order_id = id;
        o.has_price = 1, o.price = (int64_t)(splitmix(&st) % 1000);
        o.has_quantity = 1, o.quantity = (int32_t)(1 + splitmix(&st) % 10);
        snprintf(customer, sizeof customer, "customer-%03d", (int)(id % 100));
        o.customer = customer;
        if (b->pad_len) o.has_padding = 1, o.padding.data = b->pad, o.padding.len = b->pad_len;
        int rc = rl_store_save(b->s, txn, &o.base, NULL);
        if (rc) return rc;
    }
    return RL_OK;
}

int rl_cmd_load(int argc, char **argv) {
    const char *url = NULL, *store = NULL;
    long long count = -1, padding = 0;
    uint64_t seed = 1;
    uint32_t flags = RL_STORE_SPLIT_LONG_RECORDS | RL_STORE_RECORD_VERSIONS;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            help(stdout);
            return 0;
        } else if (!strcmp(a, "--allow-defects")) {
            flags |= RL_STORE_ALLOW_DEFECTS;
        } else if (v && !strcmp(a, "--db")) {
            url = v, i++;
        } else if (v && !strcmp(a, "--store")) {
            store = v, i++;
        } else if (v && !strcmp(a, "--count")) {
            count = strtoll(v, NULL, 10), i++;
        } else if (v && !strcmp(a, "--padding")) {
            padding = strtoll(v, NULL, 10), i++;
        } else if (v && !strcmp(a, "--seed")) {
            seed = strtoull(v, NULL, 10), i++;
        } else {
            fprintf(stderr, "rl load: unexpected argument '%s'\n", a);
            help(stderr);
            return 2;
        }
    }
    if (!url || count < 0 || padding < 0 || padding > 10000000) {
        help(stderr);
        return 2;
    }
    rl__tool t;
    int rc = rl__tool_open(&t, url, store, flags, 0);
    if (rc) {
        fprintf(stderr, "rl load: %s: %s\n", rl_error_name(rc), rl_record_errmsg());
        return 1;
    }
    batch b = {t.s, 1, 0, seed, NULL, (size_t)padding};
    if (padding) {
        b.pad = calloc(1, (size_t)padding);
        if (!b.pad) {
            fprintf(stderr, "rl load: out of memory\n");
            rl__tool_close(&t);
            return 1;
        }
        for (long long i = 0; i < padding; i++) b.pad[i] = (uint8_t)('a' + i % 26);
    }
    /* Batches stay far below the 10 MB transaction limit. */
    int64_t per = 4000000 / (padding + 200);
    if (per < 1) per = 1;
    if (per > 500) per = 500;
    int tty = isatty(2);
    for (int64_t done = 0; done < count && !rc; done += b.n) {
        b.first = 1 + done;
        b.n = count - done < per ? count - done : per;
        rc = rl_db_run(t.db, load_batch, &b);
        if (tty) {
            int64_t now = done + b.n, w = 40, fill = count ? now * w / count : w;
            fprintf(stderr, "\r[%.*s%*s] %lld/%lld", (int)fill, "########################################",
                    (int)(w - fill), "", (long long)now, (long long)count);
        }
    }
    if (tty) fprintf(stderr, "\n");
    free(b.pad);
    rl__tool_close(&t);
    if (rc) {
        fprintf(stderr, "rl load: %s: %s %s\n", rl_error_name(rc), rl_error_message(rc), rl_record_errmsg());
        return 1;
    }
    printf("loaded %lld records\n", count);
    return 0;
}
