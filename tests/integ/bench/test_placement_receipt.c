/* test_placement_receipt.c — `rl placement place` and `show` over an Order store on a real
 * cluster: receipts of an unchanged cluster compare equal byte for byte (across
 * an idle period), differ after a move; `place` puts the index and the records where asked
 * (records split evenly, one range per team) and `show` reports a server-disjoint fraction of 1.0
 * for disjoint teams and 0.0 for one team; the records stay readable, and mapped reads (the
 * index's server fetching the records from theirs) work right after each move; the rl tool prints
 * the same receipt as the library.
 */
#include <stdlib.h>
#include <time.h>

#include <jansson.h>

#include "cluster_fixture.h"
#include "app/placement_store.h"
#include "app/tool.h"
#include "app/placement.h"
#include "test.h"
#include "tuple/tuple.h"

#define N_ORDERS 200

static int save_fn(rl_txn *txn, void *ud) { return rl__tool_save_orders(ud, txn, 1, N_ORDERS, 42, NULL, 0); }

/* The receipt part of show, as the deterministic dump (heap). */
static char *receipt(const char *url, json_t **whole) {
    json_t *o = NULL;
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    int rc = rl__tool_placement_show(url, NULL, "price_idx", NULL, &o, &msg);
    if (rc != RL_OK)
        fail_msg("show: %s: %s", rl_error_name(rc), rl__errdetail_len(&msg) ? rl__errdetail_get(&msg) : "");
    char *s = json_dumps(json_object_get(o, "receipt"), JSON_SORT_KEYS | JSON_COMPACT);
    if (whole) *whole = o;
    else json_decref(o);
    return s;
}

/* Lines printed by `rl query --fetch remote` over the whole index right now (mapped reads: the
 * index's server fetches the records from their servers, with the map of the move just made). */
static int remote_rows(const char *url) {
    char *out = NULL;
    int rc = rl_test_run("rl", &out, NULL, "query --db '%s' --index price_idx --ge 0 --limit 1000 --fetch remote", url);
    int n = 0;
    for (char *p = out; p && *p; p++) n += *p == '\n';
    if (rc != 0) printf("rl query exited %d: %s\n", rc, out ? out : "");
    free(out);
    return rc == 0 ? n : -1;
}

static double fraction(json_t *o, const char *name) {
    return json_real_value(json_object_get(json_object_get(json_object_get(o, "receipt"), "fractions"), name));
}

typedef struct {
    rl_store *s;
    int found;
} load_ctx;

static int load_fn(rl_txn *txn, void *ud) {
    load_ctx *c = ud;
    c->found = 0;
    for (int64_t id = 1; id <= N_ORDERS; id += 7) {
        rl_buf pk;
        rl__buf_init(&pk);
        rl__tuple_packer tp;
        rl__tuple_packer_init(&tp, &pk);
        rl__tuple_pack_int(&tp, id);
        rl_record r = {0};
        int rc = rl_store_load(c->s, txn, pk.data, pk.len, &r);
        rl__buf_release(&pk);
        if (rc == RL_OK) c->found++;
        rl_record_release(&r);
        if (rc != RL_OK && rc != RL_E_NOT_FOUND) return rc;
    }
    return RL_OK;
}

TEST(placement_3_1_place_show_receipts) {
    rl__cluster_up_opts o;
    memset(&o, 0, sizeof o);
    o.n_storage = 3;
    o.n_shards = 1;
    rl_test_cluster c;
    int rc = rl_test_cluster_start(&c, &o);
    ASSERT_OK(rc);
    rl__tool t;
    ASSERT_OK(rl__tool_open(&t, c.url, NULL, RL_STORE_SPLIT_LONG_RECORDS | RL_STORE_RECORD_VERSIONS, 0));
    ASSERT_OK(rl_db_run(t.db, save_fn, t.s));
    /* 1. Unchanged: equal receipts across an idle period (the read version differs). */
    json_t *w1 = NULL, *w2 = NULL;
    char *r1 = receipt(c.url, &w1);
    struct timespec ts = {0, 400000000L};
    nanosleep(&ts, NULL);
    char *r2 = receipt(c.url, &w2);
    ASSERT_STR_EQ(r1, r2);
    ASSERT_TRUE(json_integer_value(json_object_get(w2, "read_version")) >=
                json_integer_value(json_object_get(w1, "read_version")));
    ASSERT_TRUE(fraction(w1, "server_disjoint_fraction") == 0.0);
    ASSERT_EQ(
        json_integer_value(json_object_get(json_object_get(json_object_get(w1, "receipt"), "fractions"), "records")),
        N_ORDERS);
    /* 2. Disjoint teams: the index on 1, the records split over 2 and 3. */
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    uint32_t t1[] = {1}, t2[] = {2}, t3[] = {3};
    const uint32_t *teams[] = {t2, t3};
    uint32_t nteams[] = {1, 1};
    rc = rl__tool_placement_place(c.url, NULL, NULL, "price_idx", t1, 1, teams, nteams, 2, 20000, NULL, &msg);
    if (rc) fail_msg("place: %s: %s", rl_error_name(rc), rl__errdetail_get(&msg));
    json_t *w3 = NULL;
    char *r3 = receipt(c.url, &w3);
    printf("receipt after place: %s\n", r3);
    ASSERT_TRUE(strcmp(r1, r3) != 0);
    ASSERT_TRUE(fraction(w3, "server_disjoint_fraction") == 1.0);
    ASSERT_TRUE(fraction(w3, "host_disjoint_fraction") == 0.0); /* one host: host1 */
    json_t *shards = json_object_get(json_object_get(json_object_get(w3, "receipt"), "records"), "shards");
    ASSERT_EQ(json_array_size(shards), 2);
    json_int_t n0 = json_integer_value(json_object_get(json_array_get(shards, 0), "records"));
    json_int_t n1 = json_integer_value(json_object_get(json_array_get(shards, 1), "records"));
    ASSERT_EQ(n0, N_ORDERS / 2);
    ASSERT_EQ(n1, N_ORDERS / 2);
    ASSERT_EQ(json_integer_value(
                  json_object_get(json_array_get(json_object_get(json_array_get(shards, 1), "team"), 0), "id")),
              3);
    json_t *ish = json_object_get(json_object_get(json_object_get(w3, "receipt"), "index"), "shards");
    ASSERT_EQ(json_array_size(ish), 1);
    ASSERT_EQ(
        json_integer_value(json_object_get(json_array_get(json_object_get(json_array_get(ish, 0), "team"), 0), "id")),
        1);
    ASSERT_EQ(remote_rows(c.url), N_ORDERS);
    load_ctx lc = {t.s, 0};
    ASSERT_OK(rl_db_run(t.db, load_fn, &lc));
    ASSERT_EQ(lc.found, (N_ORDERS + 6) / 7);
    /* The tool prints the same receipt. */
    char *out = NULL;
    ASSERT_EQ(rl_test_run("rl", &out, NULL, "placement --db '%s' show --index price_idx --json", c.url), 0);
    json_error_t je;
    json_t *tj = json_loads(out, 0, &je);
    ASSERT_NOT_NULL(tj);
    char *tr = json_dumps(json_object_get(tj, "receipt"), JSON_SORT_KEYS | JSON_COMPACT);
    ASSERT_STR_EQ(tr, r3);
    free(out);
    free(tr);
    json_decref(tj);
    /* 3. One team for everything: 0.0. */
    rl__errdetail_clear(&msg);
    const uint32_t *same[] = {t2};
    uint32_t nsame[] = {1};
    rc = rl__tool_placement_place(c.url, NULL, NULL, "price_idx", t2, 1, same, nsame, 1, 20000, NULL, &msg);
    if (rc) fail_msg("place: %s: %s", rl_error_name(rc), rl__errdetail_get(&msg));
    json_t *w4 = NULL;
    char *r4 = receipt(c.url, &w4);
    ASSERT_TRUE(fraction(w4, "server_disjoint_fraction") == 0.0);
    ASSERT_TRUE(strcmp(r3, r4) != 0);
    ASSERT_EQ(remote_rows(c.url), N_ORDERS);
    ASSERT_OK(rl_db_run(t.db, load_fn, &lc));
    ASSERT_EQ(lc.found, (N_ORDERS + 6) / 7);
    free(r1), free(r2), free(r3), free(r4);
    json_decref(w1), json_decref(w2), json_decref(w3), json_decref(w4);
    rl__tool_close(&t);
    rl_test_cluster_stop(&c);
}

RL_TEST_MAIN(T(placement_3_1_place_show_receipts))
