/* test_cli_limits.c — the numbers of `rl load` and `rl get` are checked in
 * full, and the advertised maxima are the true ones.
 *
 *   cli_1_1  --count/--padding/--seed with junk, trailing junk, empty and overflowing values, and
 *            --pk beyond int64, are usage errors (exit 2, the option named) and load nothing
 *            (before: 'abc' loaded 0 records, '12abc' 12, 99999999999999999999 clamped)
 *   cli_1_2  --padding at its maximum (RL__TOOL_PADDING_MAX) loads and checks clean through the
 *            CLI; one more is refused by the parser (before: 9,999,000 was accepted and failed
 *            with transaction_too_large)
 *   cli_1_3  through the library, the maximum holds for the worst Order --count allows (order_id
 *            RL__TOOL_COUNT_MAX, price 999), new and replacing an old record, and the real
 *            limit is within 10,000 bytes above it (the maximum is not an arbitrary margin)
 *   cli_1_4  --count at its maximum is accepted by the parser (checked with a store prefix that
 *            cannot be opened, so nothing is loaded) and one more is refused
 */
#include <dirent.h>
#include <stdlib.h>

#include "order.pb-c.h"
#include "record/record_int.h"
#include "app/tool.h"
#include "test.h"

/* Number of entries of directory d other than . and .. */
static int dir_entries(const char *d) {
    DIR *dh = opendir(d);
    ASSERT_NOT_NULL(dh);
    int n = 0;
    for (struct dirent *e; (e = readdir(dh));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(dh);
    return n;
}

/* `rl ARGS` must be a usage error whose stderr contains want, with nothing on stdout. */
static void expect_usage(const char *want, const char *args) {
    char *out, *err;
    int rc = rl_test_run("rl", &out, &err, "%s", args);
    if (rc != 2) fail_msg("rl %s: exit %d, want 2 (stderr: %s)", args, rc, err);
    if (!strstr(err, want)) fail_msg("rl %s: stderr '%s' lacks '%s'", args, err, want);
    if (*out) fail_msg("rl %s: printed '%s' on stdout", args, out);
    free(out);
    free(err);
}

TEST(cli_1_1_load_and_get_numbers_checked) {
    char *dir = rl_test_tmpdir("cli11"), args[4400];
    struct {
        const char *opt, *value, *want;
    } cases[] = {
        {"count", "abc", "--count: 'abc' is not an integer"},
        {"count", "12abc", "--count: '12abc' is not an integer"},
        {"count", "''", "--count: '' is not an integer"},
        {"count", "' 12'", "--count: ' 12' is not an integer"},
        {"count", "99999999999999999999", "--count: 99999999999999999999 is out of range [0, 100000000]"},
        {"count", "-1", "--count: -1 is out of range [0, 100000000]"},
        {"padding", "abc", "--padding: 'abc' is not an integer"},
        {"padding", "12abc", "--padding: '12abc' is not an integer"},
        {"padding", "-5", "--padding: -5 is out of range [0, 9990000]"},
        {"padding", "10000000", "--padding: 10000000 is out of range [0, 9990000]"},
        {"seed", "abc", "--seed: 'abc' is not an integer"},
        {"seed", "7x", "--seed: '7x' is not an integer"},
        {"seed", "-1", "--seed: -1 is out of range [0, 18446744073709551615]"},
        {"seed", "18446744073709551616", "--seed: 18446744073709551616 is out of range"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *count = strcmp(cases[i].opt, "count") ? "--count 5 " : "";
        snprintf(args, sizeof args, "load --db file:%s %s--%s %s", dir, count, cases[i].opt, cases[i].value);
        expect_usage(cases[i].want, args);
    }
    /* Nothing was opened: the directory is still empty (no LOCK, no log). */
    ASSERT_EQ(dir_entries(dir), 0);
    snprintf(args, sizeof args, "get --db file:%s --pk 99999999999999999999", dir);
    expect_usage("rl get: --pk: 99999999999999999999 is out of range [-9223372036854775808, 9223372036854775807]",
                 args);
    snprintf(args, sizeof args, "get --db file:%s --pk 3x", dir);
    expect_usage("--pk: '3x' is not an integer", args);
    ASSERT_EQ(dir_entries(dir), 0);
    /* The edges that are valid still work. */
    char *out;
    ASSERT_EQ(rl_test_rl(&out, "load --db file:%s --count 2 --seed 18446744073709551615", dir), 0);
    ASSERT_TRUE(strstr(out, "loaded 2 records") != NULL);
    free(out);
    ASSERT_EQ(rl_test_rl(&out, "get --db file:%s --pk -9223372036854775808", dir), 1); /* not found */
    ASSERT_TRUE(strstr(out, "no record with order_id -9223372036854775808") != NULL);
    free(out);
    ASSERT_EQ(rl_test_rl(&out, "get --db file:%s --pk=2", dir), 0);
    free(out);
    rl_test_rmtree(dir);
    free(dir);
}

TEST(cli_1_2_padding_max_both_sides) {
    char *dir = rl_test_tmpdir("cli12"), *out, args[4400];
    ASSERT_EQ(RL__TOOL_PADDING_MAX, 9990000);
    ASSERT_EQ(rl_test_rl(&out, "load --db file:%s --count 1 --padding %d", dir, RL__TOOL_PADDING_MAX), 0);
    ASSERT_TRUE(strstr(out, "loaded 1 records") != NULL);
    free(out);
    ASSERT_EQ(rl_test_rl(&out, "check --db file:%s", dir), 0);
    ASSERT_TRUE(strstr(out, "integrity_ok = true") != NULL);
    free(out);
    snprintf(args, sizeof args, "load --db file:%s --count 1 --padding %d", dir, RL__TOOL_PADDING_MAX + 1);
    expect_usage("--padding: 9990001 is out of range [0, 9990000]", args);
    /* The help advertises the same maximum. */
    ASSERT_EQ(rl_test_rl(&out, "load --help"), 0);
    ASSERT_TRUE(strstr(out, "integer in [0, 9990000]") != NULL);
    free(out);
    rl_test_rmtree(dir);
    free(dir);
}

typedef struct {
    rl_store *s;
    int64_t id;
    const uint8_t *pad;
    size_t pad_len;
} save_ctx;

/* Save one Order with the longest fields `rl load` can make for c->id: price 999 (the longest
 * index entry), quantity 10, a 12-byte customer. */
static int save_one(rl_txn *txn, void *ud) {
    save_ctx *c = ud;
    Reclayer__Order o = RECLAYER__ORDER__INIT;
    o.has_order_id = 1, o.order_id = c->id;
    o.has_price = 1, o.price = 999;
    o.has_quantity = 1, o.quantity = 10;
    o.customer = "customer-099";
    if (c->pad_len) o.has_padding = 1, o.padding.data = (uint8_t *)c->pad, o.padding.len = c->pad_len;
    return rl_store_save(c->s, txn, &o.base, NULL);
}

/* Save the worst-case Order with pad_len bytes of padding into a new mem: store; when replace,
 * save a small one with the same id first. Returns the save's result. */
static int try_save(const uint8_t *pad, size_t pad_len, int replace) {
    rl__tool t;
    ASSERT_OK(rl__tool_open(&t, "mem:", NULL, RL_STORE_SPLIT_LONG_RECORDS | RL_STORE_RECORD_VERSIONS, 0));
    save_ctx c = {t.s, RL__TOOL_COUNT_MAX, pad, 10};
    if (replace) ASSERT_OK(rl_db_run(t.db, save_one, &c));
    c.pad_len = pad_len;
    int rc = rl_db_run(t.db, save_one, &c);
    rl__tool_close(&t);
    return rc;
}

TEST(cli_1_3_padding_max_fits_the_worst_order) {
    size_t n = RL__TOOL_PADDING_MAX + 10000;
    uint8_t *pad = malloc(n);
    ASSERT_NOT_NULL(pad);
    for (size_t i = 0; i < n; i++) pad[i] = (uint8_t)('a' + i % 26);
    ASSERT_OK(try_save(pad, RL__TOOL_PADDING_MAX, 0));
    ASSERT_OK(try_save(pad, RL__TOOL_PADDING_MAX, 1));
    ASSERT_RC(try_save(pad, n, 0), RL_E_TRANSACTION_TOO_LARGE);
    ASSERT_RC(try_save(pad, n, 1), RL_E_TRANSACTION_TOO_LARGE);
    free(pad);
}

TEST(cli_1_4_count_max) {
    char *dir = rl_test_tmpdir("cli14"), *out, *err, args[4400];
    /* At the maximum the parser accepts; the store prefix is refused before anything loads. */
    int rc = rl_test_run("rl", &out, &err, "load --db file:%s --count %d --store '[]'", dir, RL__TOOL_COUNT_MAX);
    ASSERT_EQ(rc, 1);
    ASSERT_TRUE(strstr(err, "--store must be a non-empty JSON array") != NULL);
    free(out);
    free(err);
    snprintf(args, sizeof args, "load --db file:%s --count %d", dir, RL__TOOL_COUNT_MAX + 1);
    expect_usage("--count: 100000001 is out of range [0, 100000000]", args);
    rl_test_rmtree(dir);
    free(dir);
}

RL_TEST_MAIN(T(cli_1_1_load_and_get_numbers_checked), T(cli_1_2_padding_max_both_sides),
             T(cli_1_3_padding_max_fits_the_worst_order), T(cli_1_4_count_max))
